package crosscheck_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	. "github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// TestCrossCheckDeadPaths tries to fire, on the real Kueue, each kind of
// dead path the model proves: the lab's borrowWithinCohort (proved from
// the configuration), a withinClusterQueue and a reclaimWithinCohort
// proved by the exhaustive search. For each, explain must report the
// dead-preemption error, and the real Kueue, driven through the state the
// search says comes closest to firing it (admission.SearchPreemption:
// the most would-be victims running), must preempt nothing and admit the
// preemptor exactly when the model does.
func TestCrossCheckDeadPaths(t *testing.T) {
	cases := []struct {
		name           string
		p              *policy.Policy
		queue, setting string
	}{
		{"lab: borrowWithinCohort", Lab().Obj(), "gpu-large-model", "borrowWithinCohort"},
		{"withinClusterQueue", DeadWithin().Obj(), "svc", "withinClusterQueue"},
		{"reclaimWithinCohort", DeadReclaim().Obj(), "owner", "reclaimWithinCohort"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := admission.Explain(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			path := policy.PathString("queues", tc.queue, "preemption", tc.setting)
			dead := false
			for _, f := range r.Findings {
				dead = dead || (f.Rule == "dead-preemption" && f.Path == path && f.Severity == "error")
			}
			if !dead {
				t.Fatalf("explain does not prove %s dead", path)
			}
			dps, err := admission.SearchPreemption(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			var w *admission.Witness
			for _, dp := range dps {
				if dp.Queue == tc.queue && dp.Setting == tc.setting {
					if dp.Fired != nil {
						t.Fatalf("the search fires %s, explain calls it dead", path)
					}
					w = dp.Closest
				}
			}
			if w == nil {
				t.Fatalf("no closest state for %s", path)
			}
			_, _, d := w.Replay(tc.p)
			c := labCluster(t)
			x := newChecker(t, c, tc.p)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			x.reset(ctx, t)
			names := x.driveWitness(ctx, t, w)
			time.Sleep(5 * time.Second)
			wls := x.workloads(ctx, t)
			for n, st := range wls {
				if st.preempted != "" {
					t.Errorf("Kueue preempted %s (%s); the model proves %s dead", n, st.preempted, path)
				}
			}
			if got, want := wls[names.preemptor].admitted, d.Outcome == admission.Admit; got != want {
				t.Errorf("Kueue admitted the preemptor %s: %v; the model: %s", names.preemptor, got, d.Outcome)
			}
			t.Logf("%s: %d running, preemptor %s: %s, nothing preempted", path, len(w.Running), names.preemptor, d.Outcome)
		})
	}
}

// TestCrossCheckEvictionThenWithin is the regression of a false
// dead-preemption error: train's withinClusterQueue fires only after
// train has taken its quota back from experiments by evicting experiments'
// jobs. The model no longer calls it dead, and the real Kueue, driven
// through that sequence, evicts experiments' jobs (InCohortReclamation),
// then a mid train job for a high one (InClusterQueue), as Decide says at
// each step.
func TestCrossCheckEvictionThenWithin(t *testing.T) {
	p := EvictThenWithin().Obj()
	r, err := admission.Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Findings {
		if f.Rule == "dead-preemption" && strings.HasPrefix(f.Path, "queues.train.") {
			t.Fatalf("explain: %s: %s", f.Path, f.Message)
		}
	}
	// The model, step by step.
	s := admission.NewSnapshot(p)
	job := func(tmpl, prio string) *admission.Workload {
		tp := p.Templates[tmpl]
		return s.NewWorkload(admission.Workload{Name: tmpl, Template: tmpl, Queue: tp.Queue, Card: tp.Card,
			Priority: prio, Value: p.Priorities[prio].Value, Request: tp.Request})
	}
	admitOrEvict := func(w *admission.Workload) []admission.Target {
		d := s.Decide(w)
		if d.Outcome == admission.Preempt {
			for _, tg := range d.Targets {
				s.Remove(tg.Workload)
			}
			d2 := s.Decide(w)
			if d2.Outcome != admission.Admit {
				t.Fatalf("model: %s %s not admitted after its evictions: %s", w.Priority, w.Name, d2.Outcome)
			}
		} else if d.Outcome != admission.Admit {
			t.Fatalf("model: %s %s: %s", w.Priority, w.Name, d.Outcome)
		}
		s.Add(w)
		return d.Targets
	}
	for i := 0; i < 2; i++ {
		if tg := admitOrEvict(job("exp", "low")); len(tg) > 0 {
			t.Fatalf("model: exp low %d evicts %v", i, tg)
		}
	}
	var reasons []string
	for i := 0; i < 2; i++ {
		for _, tg := range admitOrEvict(job("tr", "mid")) {
			reasons = append(reasons, tg.Workload.Name+":"+tg.Reason)
		}
	}
	if want := "exp:InCohortReclamation exp:InCohortReclamation"; strings.Join(reasons, " ") != want {
		t.Fatalf("model: two mid train jobs evict %v, want %s", reasons, want)
	}
	last := admitOrEvict(job("tr", "high"))
	if len(last) != 1 || last[0].Reason != admission.ReasonInClusterQueue || last[0].Workload.Name != "tr" {
		t.Fatalf("model: the high train job evicts %v, want one tr job, InClusterQueue", last)
	}

	// The real Kueue, the same sequence.
	c := labCluster(t)
	x := newChecker(t, c, p)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	x.reset(ctx, t)
	exp, tr := p.Templates["exp"], p.Templates["tr"]
	lq := func(tp policy.Template) string { return p.Queues[tp.Queue].LocalQueue }
	for i := 0; i < 2; i++ {
		x.job(ctx, t, exp.Namespace, fmt.Sprintf("exp-low-%d", i), lq(exp), "low", exp.Card, exp.Request)
		x.waitFor(ctx, t, fmt.Sprintf("exp-low-%d admitted", i), func(w map[string]wlState) bool { return w[fmt.Sprintf("exp-low-%d", i)].admitted })
	}
	for i := 0; i < 2; i++ {
		x.job(ctx, t, tr.Namespace, fmt.Sprintf("tr-mid-%d", i), lq(tr), "mid", tr.Card, tr.Request)
		x.waitFor(ctx, t, fmt.Sprintf("tr-mid-%d admitted", i), func(w map[string]wlState) bool { return w[fmt.Sprintf("tr-mid-%d", i)].admitted })
	}
	wls := x.workloads(ctx, t)
	for i := 0; i < 2; i++ {
		if got := wls[fmt.Sprintf("exp-low-%d", i)].preempted; got != admission.ReasonInCohortReclamation {
			t.Errorf("exp-low-%d preempted %q, the model %s", i, got, admission.ReasonInCohortReclamation)
		}
	}
	x.job(ctx, t, tr.Namespace, "tr-high", lq(tr), "high", tr.Card, tr.Request)
	x.waitFor(ctx, t, "tr-high admitted", func(w map[string]wlState) bool { return w["tr-high"].admitted })
	wls = x.workloads(ctx, t)
	within := 0
	for i := 0; i < 2; i++ {
		if wls[fmt.Sprintf("tr-mid-%d", i)].preempted == admission.ReasonInClusterQueue {
			within++
		}
	}
	if within != 1 {
		t.Errorf("Kueue evicted %d mid train jobs with InClusterQueue, the model 1: %v", within, wls)
	}
}

// witnessNames are the Job names driveWitness gave.
type witnessNames struct{ preemptor string }

// driveWitness creates a witness's running workloads in order, each
// waiting for its admission, then its preemptor. Jobs are named
// "w-<index>-<template>", services "svc-<name>".
func (x *checker) driveWitness(ctx context.Context, t *testing.T, w *admission.Witness) witnessNames {
	t.Helper()
	if len(w.Newer) > 0 {
		t.Fatalf("witness with workloads created after the preemptor: not driven")
	}
	create := func(i int, wl admission.Workload) string {
		if wl.Service != "" {
			x.startService(ctx, t, wl.Service)
			return "svc-" + wl.Service
		}
		tp := x.p.Templates[wl.Template]
		name := fmt.Sprintf("w-%d-%s", i, wl.Template)
		x.job(ctx, t, tp.Namespace, name, x.p.Queues[tp.Queue].LocalQueue, wl.Priority, tp.Card, tp.Request)
		return name
	}
	for i, wl := range w.Running {
		name := create(i, wl)
		x.waitFor(ctx, t, name+" admitted", func(m map[string]wlState) bool { return m[name].admitted })
	}
	return witnessNames{preemptor: create(len(w.Running), w.Preemptor)}
}

// waitFor polls the cross-check Workloads until cond holds (30 s at most).
func (x *checker) waitFor(ctx context.Context, t *testing.T, what string, cond func(map[string]wlState) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return cond(x.workloads(ctx, t)), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (workloads %v)", what, err, x.workloads(ctx, t))
	}
}
