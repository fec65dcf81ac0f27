package live

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// A plain 1024 for the GPU-memory declaration in a manifest is 1,024 bytes
// to Kubernetes. Drift (a LimitRange default) and live drift (a Workload's
// pod set) read it from the same kind of object and must describe it in
// the same words: 1,024 bytes, never 1,024 MiB. (Live drift used to read a
// plain integer as MiB while drift read it as bytes.)
func TestPlainIntegerDescribedAlikeByDriftAndLiveDrift(t *testing.T) {
	const decl = "gpupolicy.dev/gpu-memory"
	want := policy.DescribeMemory("1024")
	if want != "1,024 bytes" {
		t.Fatalf("DescribeMemory(1024) = %q", want)
	}

	limitRange := func(def string) map[string][]byte {
		return map[string][]byte{"lr.yaml": []byte("apiVersion: v1\nkind: LimitRange\nmetadata: {name: gpu-memory-default, namespace: experiments}\n" +
			"spec:\n  limits:\n  - type: Container\n    default: {" + decl + ": " + def + "}\n")}
	}
	from, err := drift.Parse(limitRange("1Gi"))
	if err != nil {
		t.Fatal(err)
	}
	to, err := drift.Parse(limitRange("1024"))
	if err != nil {
		t.Fatal(err)
	}
	ds := drift.Compare(from, to)
	drift.Explain(ds, from, to, drift.GitSides)
	if len(ds) != 1 {
		t.Fatalf("differences %+v", ds)
	}
	driftSays := ds[0].Consequence
	if !strings.Contains(driftSays, "1,024 MiB at the pin, "+want+" at HEAD") {
		t.Errorf("drift: %q", driftSays)
	}

	wl := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"podSets": []any{map[string]any{
		"count": int64(1),
		"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
			"name": "main", "resources": map[string]any{"requests": map[string]any{decl: "1024"}},
		}}}},
	}}}}}
	st := podSetCount(wl, decl, admission.LimitRangeDefaults{})
	counted, ok := st.Counted, st.ByRequest == 1
	if !ok {
		t.Fatal("the pod set's declaration was not read")
	}
	wc := WorkloadCount{Owner: "Pod/eval-7x2", DeclaredByJob: true}
	wc.CountedMiB, _ = policy.QuantityMiB(counted)
	liveSays := countMessage(wc, resource.Quantity{}, false, counted, 1024)
	if !strings.Contains(liveSays, "declares "+want+" ") || strings.Contains(liveSays, "1,024 MiB") {
		t.Errorf("live drift: %q", liveSays)
	}
	if wc.CountedMiB != 0 {
		t.Errorf("a plain 1024 counted as %d MiB, want 0 (1,024 bytes)", wc.CountedMiB)
	}
}
