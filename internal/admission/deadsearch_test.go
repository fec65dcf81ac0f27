package admission

import (
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

func deadFinding(r *Report, path string) *finding.Finding {
	for i, f := range r.Findings {
		if f.Rule == RuleDeadPreemption.ID && f.Path == path {
			return &r.Findings[i]
		}
	}
	return nil
}

func deadPathOf(t *testing.T, p *policy.Policy, q, setting string) DeadPath {
	t.Helper()
	dps, err := SearchPreemption(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, dp := range dps {
		if dp.Queue == q && dp.Setting == setting {
			return dp
		}
	}
	t.Fatalf("SearchPreemption has no %s %s", q, setting)
	return DeadPath{}
}

// The regression: train's withinClusterQueue fires only in a state the
// cold-start scenarios never build (train running its own mid jobs while
// experiments, which fills first, could hold its quota). The old search
// alone misses it; the exhaustive search finds it and explain no longer
// calls it dead.
func TestDeadSearchFindsWithinAfterEviction(t *testing.T) {
	p := admissiontest.EvictThenWithin().Obj()
	e := &explainer{p: p, ladder: p.Ladder(), onDemand: p.OnDemandServices()}
	e.index()
	recs := e.searchPreemption()
	if _, ok := recs["train"].fired["withinClusterQueue"]; ok {
		t.Fatalf("the cold-start scenarios already fire train's withinClusterQueue (%s): the policy no longer tests the exhaustive search", recs["train"].fired["withinClusterQueue"])
	}
	if _, ok := recs["train"].fired["reclaimWithinCohort"]; !ok {
		t.Errorf("the cold-start scenarios do not fire train's reclaimWithinCohort: %v", recs["train"].fired)
	}
	r, err := Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	if f := deadFinding(r, `queues.train.preemption.withinClusterQueue`); f != nil {
		t.Fatalf("explain still reports train's withinClusterQueue dead: %s", f.Message)
	}
	dp := deadPathOf(t, p, "train", "withinClusterQueue")
	if dp.Fired == nil {
		t.Fatalf("SearchPreemption finds no state firing train's withinClusterQueue (%d states, cut %v)", dp.States, dp.Cut)
	}
	// The witness replays: Kueue evicts a lower train job, InClusterQueue.
	_, pre, d := dp.Fired.Replay(p)
	if d.Outcome != Preempt {
		t.Fatalf("replaying %s: %s, want preempt", dp.Fired.words(), d.Outcome)
	}
	within := false
	for _, tg := range d.Targets {
		if tg.Reason == ReasonInClusterQueue {
			within = true
			if tg.Workload.Queue != "train" || tg.Workload.Value >= pre.Value {
				t.Errorf("InClusterQueue target %s (%s, %d) for a %d preemptor", tg.Workload.Name, tg.Workload.Queue, tg.Workload.Value, pre.Value)
			}
		}
	}
	if !within {
		t.Errorf("replaying %s: targets %v, none InClusterQueue", dp.Fired.words(), d.Targets)
	}
}

// A withinClusterQueue no state fires and no configuration reason shows:
// the exhaustive search runs to its end and proves it, an error that says
// how many states it covered.
func TestDeadSearchProvesWithinDead(t *testing.T) {
	p := admissiontest.DeadWithin().Obj()
	r, err := Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	f := deadFinding(r, `queues.svc.preemption.withinClusterQueue`)
	if f == nil {
		t.Fatalf("no dead-preemption for svc's withinClusterQueue: %v", r.Findings)
	}
	if f.Severity != finding.Error {
		t.Errorf("severity %s, want error (the search ran to its end)", f.Severity)
	}
	// {}, {small}, {big}, {small, big}: the four feasible sets.
	for _, want := range []string{"can never fire", "in none of the 4 states Kueue can reach in queue svc", "evictions"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("message lacks %q: %s", want, f.Message)
		}
	}
	dp := deadPathOf(t, p, "svc", "withinClusterQueue")
	if dp.Fired != nil || dp.Cut || dp.States != 4 {
		t.Errorf("SearchPreemption: fired %v, cut %v, %d states; want none, false, 4", dp.Fired, dp.Cut, dp.States)
	}
}

// owner's reclaimWithinCohort: the preemptor waits while the borrower's
// service holds the pool, but the service is never below it. Proved by
// the search; the closest state is that wait.
func TestDeadSearchProvesReclaimDead(t *testing.T) {
	p := admissiontest.DeadReclaim().Obj()
	r, err := Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	f := deadFinding(r, `queues.owner.preemption.reclaimWithinCohort`)
	if f == nil || f.Severity != finding.Error || !strings.Contains(f.Message, "Kueue can reach in cohort co") {
		t.Fatalf("owner's reclaimWithinCohort: %+v, want an error proved by the search", f)
	}
	dp := deadPathOf(t, p, "owner", "reclaimWithinCohort")
	if dp.Closest == nil {
		t.Fatal("no closest state")
	}
	_, _, d := dp.Closest.Replay(p)
	if d.Outcome != Wait {
		t.Errorf("closest state %s: %s, want wait", dp.Closest.words(), d.Outcome)
	}
	llm := false
	for _, w := range dp.Closest.Running {
		llm = llm || w.Service == "llm"
	}
	if !llm {
		t.Errorf("closest state %s: the borrower's service is not running", dp.Closest.words())
	}
}

// A search cut by DeadSearchBudget proves nothing: a warning that says
// "not found within", never an error.
func TestDeadSearchCutIsAWarning(t *testing.T) {
	w := admissiontest.MakePolicy("many").Card("c", 1<<20, 64)
	q := admissiontest.MakeQueue("q").Flavor(admissiontest.MakeFlavor("c").Shares(64).HostMemory(1<<20).GPUMemory(1<<20)).
		Preemption("LowerPriority", "Never")
	w.Queue(q)
	// 16 services of 16 priorities, all admitted together: 2^16 sets.
	for i := 0; i < 16; i++ {
		pr := string(rune('a' + i))
		w.Priority("p"+pr, int32(i+1))
		w.Service(admissiontest.MakeService("s"+pr).OnDemand(60).Queue("q").Card("c").Priority("p"+pr).Request(1, 1024, 1024))
	}
	w.DefaultPriority("pz", 100)
	r, err := ExplainWith(w.Obj(), Options{States: StatesNone})
	if err != nil {
		t.Fatal(err)
	}
	f := deadFinding(r, `queues.q.preemption.withinClusterQueue`)
	if f == nil {
		t.Fatalf("no dead-preemption finding: %v", r.Findings)
	}
	if f.Severity != finding.Warning || !strings.Contains(f.Message, "not found within 20,000 states") || strings.Contains(f.Message, "can never fire") {
		t.Errorf("%s: %s, want a warning, not found within 20,000 states", f.Severity, f.Message)
	}
}

// The lab's borrowWithinCohort stays dead, proved from the configuration
// (gpu-general owns the whole card, so it is never above its nominal
// quota); the closest state is qwen2-5-7b waking while batch jobs run.
func TestDeadSearchLabBorrowStillDead(t *testing.T) {
	p := admissiontest.Lab().Obj()
	r, err := Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	f := deadFinding(r, `queues."gpu-large-model".preemption.borrowWithinCohort`)
	if f == nil || f.Severity != finding.Error {
		t.Fatalf("the lab's borrowWithinCohort: %+v, want a dead-preemption error", f)
	}
	dp := deadPathOf(t, p, "gpu-large-model", "borrowWithinCohort")
	if dp.Fired != nil {
		t.Fatalf("the search fires the lab's borrowWithinCohort: %s", dp.Fired.words())
	}
	if dp.Closest == nil || dp.Closest.Preemptor.Service != "qwen2-5-7b" {
		t.Fatalf("closest state %+v, want qwen2-5-7b waking", dp.Closest)
	}
	batch := 0
	for _, w := range dp.Closest.Running {
		if w.Priority == "batch" {
			batch++
		}
	}
	if batch == 0 {
		t.Errorf("closest state %s: no batch job running", dp.Closest.words())
	}
	t.Logf("lab: %d states, cut %v; closest: %s", dp.States, dp.Cut, dp.Closest.words())
}
