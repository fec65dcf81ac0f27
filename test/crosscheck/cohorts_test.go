package crosscheck_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/drift/live"
	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/internal/kube/reconcile"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// TestCrossCheckCohortTree runs policies/department, a two-level tree of
// Kueue Cohorts (the department's pool over vision and language), on the
// real Kueue. reconcile applies its Cohorts as render ships them, a second
// run changes nothing, live drift reads them back clean and reports a hand
// edit of the pool as that field; then every capacity row of explain
// matches Kueue row by row: borrowing through the parent (7 train jobs:
// vision's 5 shares and the 2 the vision Cohort's borrowingLimit lets it
// take from the department's tree; 4 while the 7B borrows GPU memory
// through the department) and reclaim from a sibling subtree (a training
// job within vision-train's quota evicts the 7B, InCohortReclamation; one
// at the 7B's priority does not).
func TestCrossCheckCohortTree(t *testing.T) {
	c := labCluster(t)
	p, err := policy.Load("../../policies/department")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := render.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, o := range res.Objects {
		if o.Kind == "Cohort" {
			files[o.File] = res.Files[o.File]
		}
	}
	set, err := drift.Parse(files)
	if err != nil {
		t.Fatal(err)
	}
	var cohorts []*unstructured.Unstructured
	for _, ref := range set.Refs() {
		cohorts = append(cohorts, &unstructured.Unstructured{Object: set[ref].Body})
	}
	if len(cohorts) != 3 {
		t.Fatalf("render ships %d Cohorts, want department, language, vision", len(cohorts))
	}
	admin, err := kube.ForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the checker's teardown, so it runs after it.
	t.Cleanup(func() {
		for _, n := range p.CohortNames() {
			_ = admin.Dynamic.Resource(contract.GVRCohort).Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	owner := map[string]string{contract.LabelManagedBy: contract.ManagedBy, contract.LabelPolicy: p.Name}
	r := &reconcile.Reconciler{Client: admin.Dynamic, Mapper: admin.Mapper}
	first, err := r.Apply(ctx, cohorts, reconcile.Options{Owner: owner})
	if err != nil {
		t.Fatalf("reconciling the Cohorts: %v\n%+v", err, first.Changes)
	}
	if first.Count(reconcile.Created) != 3 {
		t.Errorf("reconcile created %d of 3 Cohorts: %+v", first.Count(reconcile.Created), first.Changes)
	}
	again, err := r.Apply(ctx, cohorts, reconcile.Options{Owner: owner})
	if err != nil || again.Changed() || again.Count(reconcile.Unchanged) != 3 {
		t.Errorf("a second reconcile changed something (%v): %+v", err, again.Changes)
	}
	liveDiff := func() []drift.Difference {
		side := &live.Side{Client: admin.Dynamic, Mapper: admin.Mapper, Pinned: set, Owner: owner, Name: "the cluster"}
		got, err := side.Objects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return drift.Compare(set, got)
	}
	if ds := liveDiff(); len(ds) != 0 {
		t.Errorf("live drift right after reconcile: %+v", ds)
	}
	patch := `[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota","value":1}]`
	if _, err := admin.Dynamic.Resource(contract.GVRCohort).Patch(ctx, "department", types.JSONPatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	ds := liveDiff()
	if len(ds) != 1 || ds[0].Object() != "Cohort/department" ||
		ds[0].Path != "spec.resourceGroups[0].flavors[rtx-5060-ti].resources[nvidia.com/gpu].nominalQuota" || ds[0].From != "2" || ds[0].To != "1" {
		t.Errorf("live drift after a hand edit of the department's shares: %+v", ds)
	}
	back, err := r.Apply(ctx, cohorts, reconcile.Options{Owner: owner})
	if err != nil || back.Count(reconcile.Configured) != 1 {
		t.Errorf("reconcile did not put the department's quota back (%v): %+v", err, back.Changes)
	}

	x := newChecker(t, c, p)
	rep, err := admission.Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, row := range rep.Capacity {
		if row.CacheFree || !row.Reachable {
			continue
		}
		rows++
		label := fmt.Sprintf("%s at %s, %s", row.Template, row.Priority, policy.StateLabel(row.State))
		t.Run(label, func(t *testing.T) { x.checkRow(t, rep, row) })
	}
	if rows != 4 {
		t.Errorf("explain has %d rows for the department, want 4 (train at 2 priorities, the 7B down and up)", rows)
	}
}
