package render

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/crdcheck"
)

// TestRenderCohorts renders policies/department: three Kueue v1beta2
// Cohorts, the root with its own quota in the queues' resource group
// shape, the children with parentName (vision with its borrowingLimit,
// language with no quota at all), each validated
// against Kueue's Cohort CRD, and written before the ClusterQueues in
// generate's order.
func TestRenderCohorts(t *testing.T) {
	p, err := policy.Load(filepath.Join("..", "policies", "department"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	dep := find[*kueue.Cohort](t, r, "Cohort", "", "department")
	if dep.Spec.ParentName != "" || len(dep.Spec.ResourceGroups) != 1 {
		t.Fatalf("department = %+v", dep.Spec)
	}
	rg := dep.Spec.ResourceGroups[0]
	if len(rg.CoveredResources) != 3 || rg.CoveredResources[2] != "gpupolicy.dev/gpu-memory" || len(rg.Flavors) != 1 {
		t.Fatalf("department's resource group = %+v", rg)
	}
	if q := rg.Flavors[0].Resources; q[0].NominalQuota.Value() != 2 || q[1].NominalQuota.String() != "8Gi" || q[2].NominalQuota.String() != "4Gi" {
		t.Errorf("department's quotas = %+v", q)
	}
	if c := find[*kueue.Cohort](t, r, "Cohort", "", "language"); c.Spec.ParentName != "department" || c.Spec.ResourceGroups != nil {
		t.Errorf("language = %+v", c.Spec)
	}
	vision := find[*kueue.Cohort](t, r, "Cohort", "", "vision")
	if vision.Spec.ParentName != "department" || len(vision.Spec.ResourceGroups) != 1 {
		t.Fatalf("vision = %+v", vision.Spec)
	}
	if bl := vision.Spec.ResourceGroups[0].Flavors[0].Resources[0].BorrowingLimit; bl == nil || bl.Value() != 2 {
		t.Errorf("vision's shares borrowingLimit = %v, want 2", bl)
	}
	if cq := find[*kueue.ClusterQueue](t, r, "ClusterQueue", "", "vision-train"); cq.Spec.CohortName != "vision" {
		t.Errorf("vision-train's cohortName = %q", cq.Spec.CohortName)
	}
	objs := generate(p, nil)
	firstCohort, firstCQ := -1, -1
	for i, o := range objs {
		if o.Kind == "Cohort" && firstCohort < 0 {
			firstCohort = i
		}
		if o.Kind == "ClusterQueue" && firstCQ < 0 {
			firstCQ = i
		}
	}
	if firstCohort < 0 || firstCohort > firstCQ {
		t.Errorf("Cohorts at %d, ClusterQueues at %d: the Cohorts come first", firstCohort, firstCQ)
	}
}

// TestCohortCRD: crdcheck holds Kueue's Cohort CRD and runs its rules: a
// flavor with fewer quotas than the covered resources is refused.
func TestCohortCRD(t *testing.T) {
	v, err := crdcheck.New()
	if err != nil {
		t.Fatal(err)
	}
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort",
		"metadata": map[string]any{"name": "department"},
		"spec": map[string]any{"resourceGroups": []any{map[string]any{
			"coveredResources": []any{"nvidia.com/gpu", "memory"},
			"flavors": []any{map[string]any{"name": "rtx-5060-ti", "resources": []any{
				map[string]any{"name": "nvidia.com/gpu", "nominalQuota": int64(2)},
			}}},
		}}},
	}}
	if !v.Has(bad.GroupVersionKind()) {
		t.Fatal("crdcheck has no Cohort CRD")
	}
	err = v.Validate(bad)
	if err == nil || !strings.Contains(err.Error(), "flavors must have the same number of resources as the coveredResources") {
		t.Errorf("a Cohort flavor missing a covered resource: %v, want the CRD's rule", err)
	}
}
