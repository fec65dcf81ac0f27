package livedrift

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestFieldsNormalizes(t *testing.T) {
	desired := map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2",
		"kind":       "ClusterQueue",
		"metadata":   map[string]any{"name": "gpu-general", "labels": map[string]any{"app.kubernetes.io/managed-by": "gpupolicy"}},
		"spec": map[string]any{
			"cohortName":        "gpu",
			"namespaceSelector": map[string]any{},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"nvidia.com/gpu", "memory"},
				"flavors": []any{map[string]any{"name": "rtx-5060-ti", "resources": []any{
					map[string]any{"name": "nvidia.com/gpu", "nominalQuota": int64(8)},
					map[string]any{"name": "memory", "nominalQuota": "12288Mi"},
				}}},
			}},
		},
	}
	live := map[string]any{
		"metadata": map[string]any{"name": "gpu-general", "uid": "x", "resourceVersion": "42",
			"labels": map[string]any{"app.kubernetes.io/managed-by": "gpupolicy"}, "annotations": map[string]any{"x": "y"}},
		"spec": map[string]any{
			"cohortName":        "gpu",
			"flavorFungibility": map[string]any{"whenCanBorrow": "MayStopSearch"}, // defaulted by the server
			"namespaceSelector": map[string]any{},
			"queueingStrategy":  "BestEffortFIFO",
			"stopPolicy":        "None",
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"nvidia.com/gpu", "memory"},
				"flavors": []any{map[string]any{"name": "rtx-5060-ti", "resources": []any{
					map[string]any{"name": "memory", "nominalQuota": "12Gi"}, // same value, other form and order
					map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "8"},
				}}},
			}},
		},
		"status": map[string]any{"pendingWorkloads": int64(3)},
	}
	if d := Fields(desired, live); len(d) != 0 {
		t.Fatalf("equal objects differ: %+v", d)
	}
	// Someone sets the shares to 4 by hand.
	res := live["spec"].(map[string]any)["resourceGroups"].([]any)[0].(map[string]any)["flavors"].([]any)[0].(map[string]any)["resources"].([]any)
	res[1].(map[string]any)["nominalQuota"] = int64(4)
	d := Fields(desired, live)
	if len(d) != 1 {
		t.Fatalf("got %+v", d)
	}
	want := Difference{Change: Changed, Path: `spec.resourceGroups[0].flavors[rtx-5060-ti].resources[nvidia.com/gpu].nominalQuota`, Pinned: "8", Live: "4"}
	if d[0] != want {
		t.Fatalf("got  %+v\nwant %+v", d[0], want)
	}
}

func TestMiB(t *testing.T) {
	for in, want := range map[string]int64{"1024Mi": 1024, "12452Mi": 12452, "1Gi": 1024, "1024": 1024} {
		if got := mib(resource.MustParse(in)); got != want {
			t.Errorf("mib(%s) = %d, want %d", in, got, want)
		}
	}
}
