package live

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

func clusterQueue(gpu any, memory string) map[string]any {
	return map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2",
		"kind":       "ClusterQueue",
		"metadata":   map[string]any{"name": "gpu-general", "labels": map[string]any{"app.kubernetes.io/managed-by": "gpupolicy"}},
		"spec": map[string]any{
			"cohortName":        "gpu",
			"namespaceSelector": map[string]any{},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"nvidia.com/gpu", "memory"},
				"flavors": []any{map[string]any{"name": "rtx-5060-ti", "resources": []any{
					map[string]any{"name": "nvidia.com/gpu", "nominalQuota": gpu},
					map[string]any{"name": "memory", "nominalQuota": memory},
				}}},
			}},
		},
	}
}

// A live object with server-set and defaulted fields, quantities in another
// form and named items in another order projects onto the pinned object with
// no difference; a hand edit shows as exactly that field.
func TestProjectNormalizes(t *testing.T) {
	pinned := clusterQueue(int64(8), "12288Mi")
	live := clusterQueue(int64(8), "12Gi")
	live["metadata"].(map[string]any)["uid"] = "0b1c"
	live["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{"manager": "gpupolicy"}}
	live["metadata"].(map[string]any)["annotations"] = map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "{}"}
	spec := live["spec"].(map[string]any)
	spec["flavorFungibility"] = map[string]any{"whenCanBorrow": "MayStopSearch"}
	spec["stopPolicy"] = "None"
	res := spec["resourceGroups"].([]any)[0].(map[string]any)["flavors"].([]any)[0].(map[string]any)
	r := res["resources"].([]any)
	res["resources"] = []any{r[1], r[0]}
	live["status"] = map[string]any{"pendingWorkloads": int64(3)}

	set := func(body map[string]any) drift.Set {
		return drift.Set{"ClusterQueue/gpu-general": {APIVersion: "kueue.x-k8s.io/v1beta2", Kind: "ClusterQueue", Name: "gpu-general", Body: body}}
	}
	if ds := drift.Compare(set(pinned), set(Project(pinned, live))); len(ds) != 0 {
		t.Fatalf("equal objects differ: %+v", ds)
	}

	// Someone sets the shares to 4 by hand.
	r[0].(map[string]any)["nominalQuota"] = int64(4)
	ds := drift.Compare(set(pinned), set(Project(pinned, live)))
	if len(ds) != 1 {
		t.Fatalf("got %d differences: %+v", len(ds), ds)
	}
	d := ds[0]
	if d.Path != `spec.resourceGroups[0].flavors[rtx-5060-ti].resources[nvidia.com/gpu].nominalQuota` || d.From != "8" || d.To != "4" {
		t.Fatalf("got %s: %s → %s", d.Path, d.From, d.To)
	}
}

// The declaration of a Workload's pod sets, in MiB: requests × count, and a
// plain integer is bytes (1024 is 1,024 bytes, 0 MiB), as Kubernetes reads
// it.
func TestPodSetDeclarationMiB(t *testing.T) {
	const decl = "gpupolicy.dev/gpu-memory"
	for in, want := range map[string]int64{"1024Mi": 2048, "12452Mi": 24904, "1Gi": 2048, "1024": 0} {
		wl := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"podSets": []any{map[string]any{
			"count": int64(2),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
				"name": "main", "resources": map[string]any{"requests": map[string]any{decl: in}},
			}}}},
		}}}}}
		st := podSetCount(wl, decl, admission.LimitRangeDefaults{})
		q, ok := st.Counted, st.ByRequest == 1
		if got, _ := policy.QuantityMiB(q); !ok || got != want {
			t.Errorf("2 × %s = %d MiB (found %v), want %d", in, got, ok, want)
		}
	}
}
