package drift

import (
	"strings"
	"testing"
)

func cohortObj(parent, gpu, lend string) string {
	s := "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: vision}\nspec:\n"
	if parent != "" {
		s += "  parentName: " + parent + "\n"
	}
	s += `  resourceGroups:
  - coveredResources: [nvidia.com/gpu, memory, gpupolicy.dev/gpu-memory]
    flavors:
    - name: rtx-5060-ti
      resources:
      - {name: nvidia.com/gpu, nominalQuota: "` + gpu + `"` + lend + `}
      - {name: memory, nominalQuota: 8Gi}
      - {name: gpupolicy.dev/gpu-memory, nominalQuota: 4Gi}
`
	return s
}

// TestCohortDrift: a Cohort's own quota, its lending limit and its parent,
// each explained in the lab's terms; a side without the Cohort leaves its
// queues in an implicit cohort.
func TestCohortDrift(t *testing.T) {
	ds := compare(t, set(t, cohortObj("department", "2", "")), set(t, cohortObj("lab", "1", ", lendingLimit: 1")))
	want := map[string]string{
		"spec.parentName": "Cohort vision's parent is department at the pin, lab at HEAD",
		"spec.resourceGroups[0].flavors[rtx-5060-ti].resources[nvidia.com/gpu].nominalQuota": "Cohort vision holds 2 shares on rtx-5060-ti of its own at the pin, 1 share at HEAD",
		"spec.resourceGroups[0].flavors[rtx-5060-ti].resources[nvidia.com/gpu].lendingLimit": "Cohort vision's tree lends parent lab at most all of what it leaves unused on rtx-5060-ti at the pin, 1 share at HEAD",
	}
	if len(ds) != len(want) {
		t.Fatalf("differences: %+v", ds)
	}
	for _, d := range ds {
		if w := want[d.Path]; w == "" || !strings.Contains(d.Consequence, w) {
			t.Errorf("%s: %q, want %q", d.Path, d.Consequence, w)
		}
	}
	ds = compare(t, Set{}, set(t, cohortObj("", "2", "")))
	if len(ds) != 1 || !strings.Contains(ds[0].Consequence, "has no Cohort vision: the ClusterQueues and Cohorts that name it share only what they lend each other") {
		t.Errorf("a missing Cohort: %+v", ds)
	}
}
