package live

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpupolicy/gpupolicy/internal/admission"
)

// jobWorkload is a Job's Workload as Kueue makes it: the Job's pod template
// (limits only, not defaulted by the API server), optionally admitted with
// the usage Kueue counted, or pending with the requests it recorded.
func jobWorkload(limit string, admitted, recorded string) *unstructured.Unstructured {
	decl := "gpupolicy.dev/gpu-memory"
	obj := map[string]any{
		"metadata": map[string]any{"name": "job-eval-1", "namespace": "experiments"},
		"spec": map[string]any{"podSets": []any{map[string]any{
			"name": "main", "count": int64(1),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
				"name": "main", "image": "x", "resources": map[string]any{"limits": map[string]any{decl: limit}},
			}}}},
		}}},
	}
	status := map[string]any{}
	if admitted != "" {
		status["admission"] = map[string]any{"podSetAssignments": []any{map[string]any{
			"name": "main", "resourceUsage": map[string]any{decl: admitted},
		}}}
	}
	if recorded != "" {
		status["resourceRequests"] = []any{map[string]any{"name": "main", "resources": map[string]any{decl: recorded}}}
	}
	obj["status"] = status
	return &unstructured.Unstructured{Object: obj}
}

// TestLimitOnlyCountedAsKueue: a Job declaring 4,096 MiB by limit only, in
// a namespace whose LimitRange defaults requests to 1,024 MiB, is counted
// at 1,024 MiB (kubernetes-sigs/kueue#15020) — pending (what Kueue will
// count, or what it recorded) and admitted alike — and the message says so;
// without a default request Kueue takes the limit.
func TestLimitOnlyCountedAsKueue(t *testing.T) {
	const decl = "gpupolicy.dev/gpu-memory"
	def := corev1.ResourceList{decl: resource.MustParse("1024Mi")}
	lab := admission.ContainerDefaults([]corev1.LimitRange{{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Default: def, DefaultRequest: def}}}}})
	want := "Job/eval declares 4,096 MiB by limit only: it %s as 1,024 MiB, the LimitRange default (Kueue v0.17 gives a container without a request " +
		"its namespace's LimitRange defaultRequest before it looks at the limit, kubernetes-sigs/kueue#15020), while its pod asks 4,096 MiB of the node"
	for _, tc := range []struct {
		name                string
		wl                  *unstructured.Unstructured
		lr                  admission.LimitRangeDefaults
		counted             int64
		admitted, atDefault bool
		message             string
	}{
		{"pending, not yet tried", jobWorkload("4Gi", "", ""), lab, 1024, false, true, "is counted"},
		// What Kueue recorded wins over what the LimitRanges read now say.
		{"pending, recorded by Kueue", jobWorkload("4Gi", "", "1Gi"), admission.LimitRangeDefaults{}, 1024, false, true, "is counted"},
		{"admitted", jobWorkload("4Gi", "1Gi", ""), lab, 1024, true, true, "was counted"},
		{"no LimitRange", jobWorkload("4Gi", "", ""), admission.LimitRangeDefaults{}, 4096, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wc := WorkloadCount{Owner: "Job/eval", AskedMiB: -1, CountedMiB: -1, DeclaredMiB: -1, DeclaredByJob: true}
			counted := readDeclaration(tc.wl, decl, tc.lr, &wc)
			wc.AtDefault = atDefault(wc, counted)
			msg := countMessage(wc, resource.Quantity{}, false, counted, 1024)
			if wc.CountedMiB != tc.counted || wc.DeclaredMiB != 4096 || !wc.LimitOnly || wc.Admitted != tc.admitted || wc.AtDefault != tc.atDefault {
				t.Errorf("%+v", wc)
			}
			switch {
			case tc.message != "":
				if w := fmt.Sprintf(want, tc.message); msg != w {
					t.Errorf("message\n%q\nwant\n%q", msg, w)
				}
			default:
				if w := "Job/eval declares 4,096 MiB by limit only and is counted as 4,096 MiB: its namespace has no LimitRange default request for it, so Kueue takes the limit"; msg != w {
					t.Errorf("message %q", msg)
				}
			}
		})
	}
}
