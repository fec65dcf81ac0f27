package admission_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	at "github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

func accessOf(t *testing.T, r *admission.Report, ns string) admission.NamespaceAccess {
	t.Helper()
	for _, a := range r.Access {
		if a.Namespace == ns {
			return a
		}
	}
	t.Fatalf("no access entry for %s in %+v", ns, r.Access)
	return admission.NamespaceAccess{}
}

// evictions returns a namespace's paths to the victims' namespace, by
// setting.
func evictions(a admission.NamespaceAccess, victims string) map[string]admission.EvictionRight {
	out := map[string]admission.EvictionRight{}
	for _, er := range a.Evicts {
		if er.Namespace == victims {
			out[er.Setting] = er
		}
	}
	return out
}

// The lab: experiments (training and below) can evict the 7B of llm by
// reclaiming the share gpu-large-model borrows, from training only; llm
// evicts no one (its borrowWithinCohort toward the batch jobs is the dead
// path: gpu-general is never above its nominal quota); models, at
// always-on, can evict every job of experiments in their shared queue and
// the 7B.
func TestAccessLab(t *testing.T) {
	r := explain(t, loadLab(t))
	exp := accessOf(t, r, "experiments")
	if !slices.Equal(exp.Priorities, []string{"training", "on-demand-llm", "batch"}) || !exp.PrioritiesDefault ||
		!slices.Equal(exp.LocalQueues, []string{"gpu-general"}) {
		t.Errorf("experiments may use %+v", exp)
	}
	if len(exp.Evicts) != 1 {
		t.Fatalf("experiments evicts %+v, want only the 7B", exp.Evicts)
	}
	reclaim := exp.Evicts[0]
	if reclaim.Namespace != "llm" || reclaim.Setting != "reclaimWithinCohort" || !reclaim.Possible ||
		!slices.Equal(reclaim.By, []string{"training"}) || !slices.Equal(reclaim.Priorities, []string{"on-demand-llm"}) ||
		reclaim.When != "while gpu-large-model is above its nominal quota" {
		t.Errorf("experiments → llm: %+v", reclaim)
	}

	llm := accessOf(t, r, "llm")
	ev := evictions(llm, "experiments")
	for _, setting := range []string{"reclaimWithinCohort", "borrowWithinCohort"} {
		er, ok := ev[setting]
		if !ok || er.Possible || !slices.Equal(er.Priorities, []string{"batch"}) ||
			!strings.Contains(er.Never, "kubernetes-sigs/kueue#10171") || !strings.Contains(er.Never, "gpu-general owns all of cohort gpu's quota") {
			t.Errorf("llm → experiments by %s: %+v", setting, er)
		}
	}
	if slices.ContainsFunc(llm.Evicts, func(er admission.EvictionRight) bool { return er.Possible }) {
		t.Errorf("llm can evict someone: %+v", llm.Evicts)
	}

	models := accessOf(t, r, "models")
	if !slices.Equal(models.Priorities, []string{"always-on"}) {
		t.Errorf("models may use %v", models.Priorities)
	}
	within := evictions(models, "experiments")["withinClusterQueue"]
	if !within.Possible || within.Queue != "gpu-general" || !slices.Equal(within.Priorities, []string{"training", "on-demand-llm", "batch"}) {
		t.Errorf("models → experiments: %+v", within)
	}
	if er := evictions(models, "llm")["reclaimWithinCohort"]; !er.Possible || !slices.Equal(er.Priorities, []string{"on-demand-llm"}) {
		t.Errorf("models → llm: %+v", er)
	}

	var text, md, js bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Who may evict whom",
		"  experiments: priorities training, on-demand-llm, batch (the default); LocalQueues gpu-general (the default)\n",
		"  llm: priorities on-demand-llm (the default); LocalQueues gpu-large-model (the default)\n    evicts no other namespace's workloads\n",
		"at always-on, can evict the training, on-demand-llm and batch workloads of experiments",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "- **llm**: priorities on-demand-llm (the default); LocalQueues gpu-large-model (the default); evicts no other namespace's workloads\n") {
		t.Errorf("markdown:\n%s", md.String())
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Access []map[string]any `json:"access"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || len(doc.Access) != 3 || doc.Access[0]["namespace"] != "experiments" {
		t.Fatalf("json access %v (%v)", doc.Access, err)
	}
	for _, k := range []string{"priorities", "prioritiesDefault", "queues", "localQueues", "queuesDefault", "evicts"} {
		if _, ok := doc.Access[0][k]; !ok {
			t.Errorf("json access entry lacks %q", k)
		}
	}
}

// Taking training from experiments takes its path to the 7B away: batch
// and on-demand-llm are not above the 7B's priority.
func TestAccessFollowsTheRules(t *testing.T) {
	p := *loadLab(t)
	p.Access = map[string]policy.Access{"experiments": {Namespace: "experiments", Priorities: []string{"batch"}, PrioritiesStated: true}}
	r := explain(t, &p)
	exp := accessOf(t, r, "experiments")
	if !slices.Equal(exp.Priorities, []string{"batch"}) || exp.PrioritiesDefault || len(exp.Evicts) != 0 {
		t.Errorf("experiments at batch only: %+v", exp)
	}
	if within := evictions(accessOf(t, r, "models"), "experiments")["withinClusterQueue"]; !slices.Equal(within.Priorities, []string{"batch"}) {
		t.Errorf("models → experiments: %+v", within)
	}
}

// Each setting's priority rule: LowerOrNewerEqualPriority takes equal
// priorities too, Any takes every one, borrowWithinCohort stops at
// maxPriorityThreshold; a path Kueue never takes says why, consistent
// with the dead-preemption findings; a ClusterQueue Kueue rejects evicts
// no one.
func TestAccessSettings(t *testing.T) {
	build := func(bPreemption func(*at.QueueWrapper) *at.QueueWrapper) *policy.Policy {
		return at.MakePolicy("teams").Card("a100", 40960, 8).
			Priority("high", 100).DefaultPriority("mid", 50).Priority("low", 10).
			Queue(at.MakeQueue("qa").Cohort("c").Namespaces("team-a", "team-c").
				Flavor(at.MakeFlavor("a100").Shares(4).GPUMemory(20480)).
				Preemption("LowerOrNewerEqualPriority", "Any").BorrowWithinCohort("LowerPriority", "low")).
			Queue(bPreemption(at.MakeQueue("qb").Cohort("c").Namespaces("team-b").
				Flavor(at.MakeFlavor("a100").Shares(4).GPUMemory(20480)))).
			Template(at.MakeTemplate("step-a").Namespace("team-a").Queue("qa").Card("a100").Request(1, 0, 1024)).
			Template(at.MakeTemplate("step-b").Namespace("team-b").Queue("qb").Card("a100").Request(1, 0, 1024)).
			Template(at.MakeTemplate("step-c").Namespace("team-c").Queue("qa").Card("a100").Priority("low").Request(1, 0, 1024)).
			Obj()
	}
	p := build(func(q *at.QueueWrapper) *at.QueueWrapper { return q })
	r := explain(t, p)
	a := accessOf(t, r, "team-a")
	if !slices.Equal(a.Priorities, []string{"mid", "low"}) {
		t.Fatalf("team-a may use %v", a.Priorities)
	}
	within := evictions(a, "team-c")["withinClusterQueue"]
	if !within.Possible || !slices.Equal(within.By, []string{"mid", "low"}) || !slices.Equal(within.Priorities, []string{"low"}) {
		t.Errorf("team-a → team-c, LowerOrNewerEqualPriority: %+v", within)
	}
	if c := evictions(accessOf(t, r, "team-c"), "team-a")["withinClusterQueue"]; !slices.Equal(c.By, []string{"low"}) || !slices.Equal(c.Priorities, []string{"low"}) {
		t.Errorf("team-c → team-a: equal and newer only: %+v", c)
	}
	ev := evictions(a, "team-b")
	if rc := ev["reclaimWithinCohort"]; !rc.Possible || !slices.Equal(rc.By, []string{"mid", "low"}) || !slices.Equal(rc.Priorities, []string{"mid", "low"}) {
		t.Errorf("team-a → team-b, reclaim Any: %+v", rc)
	}
	bw, ok := ev["borrowWithinCohort"]
	if !ok || !slices.Equal(bw.By, []string{"mid"}) || !slices.Equal(bw.Priorities, []string{"low"}) {
		t.Fatalf("team-a → team-b, borrowWithinCohort up to low: %+v", bw)
	}
	dead := len(findingsAtPath(r, "dead-preemption", `queues.qa.preemption.borrowWithinCohort`)) > 0
	if bw.Possible == dead || dead && !strings.Contains(bw.Never, "dead-preemption") {
		t.Errorf("borrowWithinCohort possible=%v, yet the dead-preemption finding %v: %+v", bw.Possible, dead, bw)
	}
	if bw.Possible && bw.When != "while qb is above its nominal quota and qa borrows" {
		t.Errorf("when: %q", bw.When)
	}
	if len(evictions(accessOf(t, r, "team-b"), "team-a")) != 0 {
		t.Errorf("qb preempts nothing, yet team-b evicts: %+v", accessOf(t, r, "team-b").Evicts)
	}

	// qb as Kueue rejects it: borrowWithinCohort without reclaimWithinCohort.
	r = explain(t, build(func(q *at.QueueWrapper) *at.QueueWrapper { return q.BorrowWithinCohort("LowerPriority", "") }))
	b := accessOf(t, r, "team-b")
	if len(b.Evicts) == 0 {
		t.Fatal("qb's borrowWithinCohort gives team-b no path at all")
	}
	for _, er := range b.Evicts {
		if er.Possible || !strings.Contains(er.Never, "Kueue rejects ClusterQueue qb") {
			t.Errorf("a rejected queue evicts: %+v", er)
		}
	}
}

func findingsAtPath(r *admission.Report, rule, path string) []string {
	var out []string
	for _, f := range r.Findings {
		if f.Rule == rule && f.Path == path {
			out = append(out, f.Message)
		}
	}
	return out
}
