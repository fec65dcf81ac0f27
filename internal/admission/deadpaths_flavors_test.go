package admission

import (
	"testing"

	. "github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// TestDeadReasonsAnyCard: q's anyCard jobs ask 2 shares; q owns 1 of a
// and 2 of b, and o borrows q's b with its jobs. A job of q fits q's
// nominal quota only on b, where it can reclaim from o, so no reason may
// prove reclaimWithinCohort dead (the template's own card, a, alone would
// say that nothing in q fits its nominal quota); and what o borrows on b
// counts as q's jobs' business (borrowWho lists b).
func TestDeadReasonsAnyCard(t *testing.T) {
	ample := func(f *FlavorWrapper, shares int64) *FlavorWrapper {
		return f.Shares(shares).HostMemory(GiB(64)).GPUMemory(100000)
	}
	p := MakePolicy("reclaim-any").Card("a", 16311, 8).Card("b", 16311, 8).CardNodeLabels("b", nil).
		Priority("high", 100).DefaultPriority("low", 10).
		Queue(MakeQueue("q").Namespaces("experiments").Cohort("co").Preemption("LowerPriority", "LowerPriority").
			Flavor(ample(MakeFlavor("a"), 1)).Flavor(ample(MakeFlavor("b"), 2))).
		Queue(MakeQueue("o").Namespaces("other").Cohort("co").Flavor(ample(MakeFlavor("b"), 0))).
		Template(MakeTemplate("any").Namespace("experiments").Queue("q").Card("a").AnyCard().Request(2, GiB(1), 1000)).
		Template(MakeTemplate("borrower").Namespace("other").Queue("o").Card("b").Request(1, GiB(1), 1000)).Obj()
	e := &explainer{p: p, ladder: p.Ladder(), onDemand: p.OnDemandServices()}
	e.index()
	if reasons := e.deadReasons("q", "reclaimWithinCohort"); reasons != nil {
		t.Errorf("q's reclaimWithinCohort proved dead: %q", reasons)
	}
	_, frs, _ := e.borrowWho("q")
	onB := false
	for _, fr := range frs {
		onB = onB || fr == FlavorResource{"b", policy.Shares}
	}
	if !onB {
		t.Errorf("borrowWho(q) resources %v lack b's shares", frs)
	}
	// Explain agrees: the reclaim fires, no dead-preemption finding.
	r, err := Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	if f := deadFinding(r, policy.PathString("queues", "q", "preemption", "reclaimWithinCohort")); f != nil {
		t.Errorf("dead reclaim on q: %s", f.Message)
	}
}
