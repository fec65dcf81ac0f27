package render

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// TestRenderFlavors renders the lab with a queue of two cards
// (internal/policy/testdata/two-cards.cue): the ClusterQueue lists the
// flavors in the policy's order and carries the flavorFungibility the
// policy writes (checked against Kueue's CRD by crdcheck, as every
// render); a pinned template's pod names its card's nodeLabels, an
// anyCard one's names none.
func TestRenderFlavors(t *testing.T) {
	files := map[string][]byte{}
	for _, pat := range []string{filepath.Join(labDir(), "*.cue"), filepath.Join("..", "internal", "policy", "testdata", "two-cards.cue")} {
		names, err := filepath.Glob(pat)
		if err != nil || len(names) == 0 {
			t.Fatalf("%s: %v", pat, err)
		}
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			files[filepath.Base(n)] = b
		}
	}
	p, err := policy.LoadFiles(files, func(n string) string { return n })
	if err != nil {
		t.Fatal(err)
	}
	r, err := Render(p)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	cq := find[*kueue.ClusterQueue](t, r, "ClusterQueue", "", "gpu-mixed")
	var flavors []string
	for _, f := range cq.Spec.ResourceGroups[0].Flavors {
		flavors = append(flavors, string(f.Name))
	}
	if !slices.Equal(flavors, []string{"l4", "a100"}) {
		t.Errorf("gpu-mixed's flavors %v, want l4, a100", flavors)
	}
	if f := cq.Spec.FlavorFungibility; f == nil || f.WhenCanBorrow != kueue.TryNextFlavor || f.WhenCanPreempt != kueue.TryNextFlavor {
		t.Errorf("gpu-mixed's flavorFungibility %+v, want TryNextFlavor twice", f)
	}
	if !strings.Contains(string(r.Files[fileOf(t, r, "ClusterQueue", "gpu-mixed")]), "whenCanBorrow: TryNextFlavor") {
		t.Error("the ClusterQueue's YAML has no whenCanBorrow")
	}
	if f := find[*kueue.ClusterQueue](t, r, "ClusterQueue", "", "gpu-general").Spec.FlavorFungibility; f != nil {
		t.Errorf("gpu-general writes no flavorFungibility, rendered %+v", f)
	}
	for tmpl, want := range map[string]map[string]string{
		"gpu-any":    nil,
		"gpu-a100":   nil,
		"gpu-pinned": p.Cards["l4"].NodeLabels,
	} {
		wt := find[*wfv1.WorkflowTemplate](t, r, "WorkflowTemplate", "experiments", tmpl)
		if got := wt.Spec.Templates[0].NodeSelector; !maps.Equal(got, want) {
			t.Errorf("%s's nodeSelector %v, want %v", tmpl, got, want)
		}
		d := wt.Annotations[contract.AnnotationArgoDescription]
		if any := strings.Contains(d, "the first of l4, a100 where it fits"); any != (want == nil) {
			t.Errorf("%s's description: %s", tmpl, d)
		}
	}
}

func fileOf(t *testing.T, r *Result, kind, name string) string {
	t.Helper()
	for _, o := range r.Objects {
		if o.Kind == kind && o.Name == name {
			return o.File
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return ""
}
