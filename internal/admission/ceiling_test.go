package admission_test

import (
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	at "github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// The most GPU memory a workload in each queue could ever be admitted
// with: the lab's general queue owns the whole card (16,311 MiB, nothing
// to borrow); the large-model queue owns nothing and borrows up to its
// borrowingLimit, 12,200 MiB. A quota above the card is capped by what
// the card's nodes advertise; a second card per node lifts that cap.
func TestDeclarationCeiling(t *testing.T) {
	lab := loadLab(t)
	over := at.MakePolicy("over").Card("a100", 40960, 8).DefaultPriority("p", 1).
		Queue(at.MakeQueue("big").Flavor(at.MakeFlavor("a100").Shares(8).GPUMemory(50000))).
		Queue(at.MakeQueue("team-a").Cohort("c").Flavor(at.MakeFlavor("a100").Shares(4).GPUMemory(10000))).
		Queue(at.MakeQueue("team-b").Cohort("c").Flavor(at.MakeFlavor("a100").Shares(4).GPUMemory(6000).
			LendingLimit(policy.GPUMemory, 2000))).
		Obj()
	twoCards := at.MakePolicy("two").Card("a100", 40960, 8).DefaultPriority("p", 1).
		Queue(at.MakeQueue("big").Flavor(at.MakeFlavor("a100").Shares(8).GPUMemory(50000))).
		Obj()
	c := twoCards.Cards["a100"]
	c.CardsPerNode = 2
	twoCards.Cards["a100"] = c
	for _, tc := range []struct {
		p       *policy.Policy
		queue   string
		mib     int64
		node    bool
		inWords []string
	}{
		{lab, "gpu-general", 16311, false, []string{"its nominalQuota 16,311 MiB, and the other queues of cohort gpu have nothing to lend it"}},
		{lab, "gpu-large-model", 12200, false, []string{"at most 12,200 MiB", "nominalQuota 0 MiB plus its borrowingLimit 12,200 MiB in cohort gpu"}},
		{over, "big", 40960, true, []string{"at most 50,000 MiB", "(no cohort to borrow from)", "nodes advertise only 40,960 MiB"}},
		// team-a: its 10,000 plus the 2,000 team-b lends; team-b: its
		// 6,000 plus all of team-a's 10,000.
		{over, "team-a", 12000, false, []string{"plus the 2,000 MiB the other queues of cohort c lend"}},
		{over, "team-b", 16000, false, []string{"nominalQuota 6,000 MiB plus the 10,000 MiB"}},
		{twoCards, "big", 50000, false, []string{"at most 50,000 MiB"}},
	} {
		got, ok := admission.DeclarationCeiling(tc.p, tc.queue)
		if !ok {
			t.Fatalf("%s/%s: no ceiling", tc.p.Name, tc.queue)
		}
		if got.MiB != tc.mib || got.BoundByNode() != tc.node {
			t.Errorf("%s/%s: ceiling %d MiB (by node: %v), want %d (%v): %+v", tc.p.Name, tc.queue, got.MiB, got.BoundByNode(), tc.mib, tc.node, got)
		}
		for _, w := range tc.inWords {
			if !strings.Contains(got.Words(), w) {
				t.Errorf("%s/%s: %q does not say %q", tc.p.Name, tc.queue, got.Words(), w)
			}
		}
	}
	if _, ok := admission.DeclarationCeiling(lab, "no-such-queue"); ok {
		t.Error("a ceiling for a queue the policy lacks")
	}
}

// The ceiling is Kueue's own line: a job declaring it is admitted on an
// empty cluster, one MiB more never is (Decide: NoFit).
func TestDeclarationCeilingIsKueuesLine(t *testing.T) {
	lab := loadLab(t)
	for _, q := range []string{"gpu-general", "gpu-large-model"} {
		c, _ := admission.DeclarationCeiling(lab, q)
		for _, tc := range []struct {
			mib  int64
			want admission.Outcome
		}{{c.MiB, admission.Admit}, {c.MiB + 1, admission.NoFit}} {
			s := admission.NewSnapshot(lab)
			w := s.NewWorkload(admission.Workload{Name: "job", Queue: q, Card: c.Card, Priority: "batch", Value: 10,
				Request: policy.Request{Shares: 1, GPUMemoryMiB: tc.mib}})
			if d := s.Decide(w); d.Outcome != tc.want {
				t.Errorf("%s: a job declaring %d MiB: %v, want %v", q, tc.mib, d.Outcome, tc.want)
			}
		}
	}
}
