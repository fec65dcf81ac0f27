package admission_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// The lab's vLLM benchmark, exclusive: it asks what the four always-on
// models leave the general queue (8 − 4 shares, 16,311 − 3,707 MiB) and
// its own 8 GiB, and nothing is admitted beside it in either state of the
// 7B. With the 7B down it evicts four running batch (or on-demand-llm)
// jobs and waits for four training ones; with the 7B up it reclaims the
// 7B's borrowed share.
func TestLabExclusive(t *testing.T) {
	lab := loadLab(t)
	r := explain(t, lab)
	if len(r.Exclusive) != 1 {
		t.Fatalf("exclusive section: %+v", r.Exclusive)
	}
	x := r.Exclusive[0]
	want := map[string]string{"nvidia.com/gpu": "4", "memory": "8Gi", "gpupolicy.dev/gpu-memory": "12604Mi"}
	for k, v := range want {
		if x.Request[k] != v {
			t.Errorf("request %s = %q, want %q (all %v)", k, x.Request[k], v, x.Request)
		}
	}
	if x.Template != "vllm-bench" || x.Priority != "training" || x.Jobs != "evict" || !x.Alone || x.StatesChecked != 2 || x.StatesTotal != 2 {
		t.Errorf("%s at %s, jobs %s, alone %v, states %d of %d", x.Template, x.Priority, x.Jobs, x.Alone, x.StatesChecked, x.StatesTotal)
	}
	down, ok := x.StateOf()
	if !ok {
		t.Fatal("no state with the 7B down")
	}
	if down.Outcome != "admit" || len(down.Beside) != 0 || len(down.Evicts) != 0 {
		t.Errorf("7B down: %s, beside %v, evicts %v", down.Outcome, down.Beside, down.Evicts)
	}
	got := map[string]string{}
	for _, row := range down.Running {
		got[row.Template+"@"+row.Priority] = row.Outcome
		if row.Count != 4 {
			t.Errorf("7B down: %d %s jobs at %s running, want 4", row.Count, row.Template, row.Priority)
		}
		if row.Outcome == admission.ExclusiveEvicts && len(row.Evicts) != 4 {
			t.Errorf("7B down: evicts %d %s jobs at %s, want 4", len(row.Evicts), row.Template, row.Priority)
		}
	}
	wantRows := map[string]string{"gpu-step@training": "waits", "gpu-step@on-demand-llm": "evicts", "gpu-step@batch": "evicts"}
	if len(got) != len(wantRows) {
		t.Errorf("7B down: running rows %v, want %v", got, wantRows)
	}
	for k, v := range wantRows {
		if got[k] != v {
			t.Errorf("7B down: %s %s, want %s", k, got[k], v)
		}
	}
	// Only a one-share pod at always-on (the models namespace) takes the
	// card back: withinClusterQueue LowerPriority.
	if len(down.EvictedBy) != 1 || down.EvictedBy[0].Priority != "always-on" || down.EvictedBy[0].Queue != "gpu-general" {
		t.Errorf("7B down: evicted by %+v", down.EvictedBy)
	}
	up, ok := x.StateOf("qwen2-5-7b")
	if !ok {
		t.Fatal("no state with the 7B up")
	}
	if up.Outcome != "preempt" || len(up.Evicts) != 1 || up.Evicts[0].Service != "qwen2-5-7b" || up.Evicts[0].Policy != "reclaimWithinCohort" || len(up.Beside) != 0 {
		t.Errorf("7B up: %s, evicts %+v, beside %+v", up.Outcome, up.Evicts, up.Beside)
	}
	// The exclusive template has no capacity rows: the lab's numbers stay.
	for _, c := range r.Capacity {
		if c.BaseTemplate == "vllm-bench" {
			t.Fatalf("capacity row for the exclusive template: %+v", c)
		}
	}
	if c := row(t, r, "gpu-step", "batch"); c.Admitted != 4 {
		t.Errorf("batch jobs with the 7B down: %d, want 4", c.Admitted)
	}
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"vllm-bench (ClusterQueue gpu-general, training priority, jobs: evict) asks 4 shares, 8,192 MiB host memory, 12,604 MiB GPU memory",
		"running jobs it evicts: 4 × gpu-step job at on-demand-llm, 4 × gpu-step job at batch",
		"admitted after Kueue evicts qwen2-5-7b (reclaimWithinCohort), and nothing is admitted beside it",
		"the always-on services leave (they keep their own quota and run beside it): Kueue admits nothing else beside it",
	} {
		if !strings.Contains(strings.Join(strings.Fields(buf.String()), " "), s) {
			t.Errorf("text lacks %q:\n%s", s, buf.String())
		}
	}
	buf.Reset()
	if err := r.WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "#### Exclusive templates (the card to itself by quota)\n\n- `vllm-bench` (ClusterQueue gpu-general, training priority, jobs: evict) asks 4 shares") {
		t.Errorf("markdown lacks the exclusive section:\n%s", buf.String())
	}
	b, _ := json.Marshal(r)
	if !bytes.Contains(b, []byte(`"exclusive":[{"template":"vllm-bench"`)) {
		t.Errorf("JSON lacks the exclusive section")
	}
}

// exclusivePolicy is a small policy: one card of 8 shares, an always-on
// service holding 2, a general queue owning the rest and an exclusive
// step template in it.
func exclusivePolicy(jobs, priority string) *admissiontest.PolicyWrapper {
	return admissiontest.MakePolicy("x").Card("card", 16000, 8).
		Priority("top", 1000).DefaultPriority("training", 100).Priority("batch", 10).
		Queue(admissiontest.MakeQueue("general").Cohort("c").Namespaces("jobs", "svc").
			Flavor(admissiontest.MakeFlavor("card").Shares(8).HostMemory(admissiontest.GiB(16)).GPUMemory(16000)).
			Preemption("LowerPriority", "LowerPriority")).
		Service(admissiontest.MakeService("model").Namespace("svc").Queue("general").Card("card").Priority("top").Request(2, admissiontest.GiB(2), 4000)).
		Template(admissiontest.MakeTemplate("job").Namespace("jobs").Queue("general").Card("card").Request(1, admissiontest.GiB(1), 1000)).
		Template(admissiontest.MakeTemplate("bench").Namespace("jobs").Queue("general").Card("card").Priority(priority).
			Request(1, admissiontest.GiB(4), 8000).Exclusive(jobs))
}

func sizeErr(t *testing.T, p *policy.Policy) finding.List {
	t.Helper()
	_, _, err := admission.SizeLocks(p)
	var ds finding.List
	if err != nil && !errors.As(err, &ds) {
		t.Fatalf("SizeLocks: %v", err)
	}
	return ds
}

func rules(ds finding.List) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Rule)
	}
	return out
}

func TestExclusiveRules(t *testing.T) {
	// As meant: sized to 6 shares and 12,000 MiB, evicts the batch jobs.
	p := exclusivePolicy(policy.ExclusiveEvict, "training").Obj()
	if ds := sizeErr(t, p); len(ds) != 0 {
		t.Fatalf("findings on the good policy: %v", ds)
	}
	sized, _, _ := admission.SizeLocks(p)
	if got := sized.Templates["bench"].Request; got.Shares != 6 || got.GPUMemoryMiB != 12000 || got.HostMemoryMiB != admissiontest.GiB(4) {
		t.Errorf("sized request %+v, want 6 shares, 12,000 MiB, its own 4 GiB", got)
	}
	if p.Templates["bench"].Request.Shares != 1 {
		t.Errorf("SizeLocks changed its input")
	}

	for _, tc := range []struct {
		name string
		p    *policy.Policy
		rule string
		says string
	}{
		{"says wait but evicts", exclusivePolicy(policy.ExclusiveWait, "training").Obj(), admission.RuleExclusiveJobs.ID,
			`bench says jobs: "wait", but at training priority it evicts running job jobs at batch (withinClusterQueue)`},
		{"says evict at the lowest priority", exclusivePolicy(policy.ExclusiveEvict, "batch").Obj(), admission.RuleExclusiveJobs.ID,
			`it evicts no running job in any service state`},
		{"needs more than is left", func() *policy.Policy {
			p := exclusivePolicy(policy.ExclusiveWait, "batch").Obj()
			b := p.Templates["bench"]
			b.Request.GPUMemoryMiB = 13000
			p.Templates["bench"] = b
			return p
		}(), admission.RuleExclusiveFits.ID, "bench needs at least 13,000 MiB GPU memory in ClusterQueue general on card, but the always-on services holding quota there (model) leave it 12,000 MiB GPU memory"},
		{"a queue of its own on the card", func() *policy.Policy {
			return exclusivePolicy(policy.ExclusiveWait, "batch").
				Queue(admissiontest.MakeQueue("side").Namespaces("side").
					Flavor(admissiontest.MakeFlavor("card").Shares(1).HostMemory(admissiontest.GiB(1)).GPUMemory(1000))).Obj()
		}(), admission.RuleExclusiveAlone.ID, "a one-share workload at training priority in ClusterQueue side is admitted beside it"},
		{"an on-demand service with quota of its own", func() *policy.Policy {
			w := exclusivePolicy(policy.ExclusiveWait, "batch").
				Queue(admissiontest.MakeQueue("llmq").Namespaces("llm").
					Flavor(admissiontest.MakeFlavor("card").Shares(1).HostMemory(admissiontest.GiB(1)).GPUMemory(1000)))
			w.Service(admissiontest.MakeService("llm").OnDemand(600).Namespace("llm").Queue("llmq").Card("card").Priority("top").Request(1, admissiontest.GiB(1), 1000))
			return w.Obj()
		}(), admission.RuleExclusiveAlone.ID, "bench does not get card to itself: if llm comes up while bench runs, Kueue admits llm beside it at top priority in ClusterQueue llmq"},
		{"it must borrow to be admitted", func() *policy.Policy {
			p := exclusivePolicy(policy.ExclusiveEvict, "training").
				Queue(admissiontest.MakeQueue("lender").Cohort("c").Namespaces("lend").
					Flavor(admissiontest.MakeFlavor("card").Shares(0).HostMemory(0).GPUMemory(10000))).Obj()
			q := p.Queues["general"]
			f := q.Flavors["card"]
			f.GPUMemory.Nominal = 6000
			q.Flavors["card"] = f
			p.Queues["general"] = q
			return p
		}(), admission.RuleExclusiveJobs.ID, "a lower priority: it asks 12,000 MiB GPU memory of card, above ClusterQueue general's nominalQuota of 6,000 MiB GPU memory, and Kueue's flavor assigner tries preemption for a request above nominalQuota only with borrowWithinCohort (fitsResourceQuota), so it never evicts them"},
		{"Kueue picks its card", func() *policy.Policy {
			p := exclusivePolicy(policy.ExclusiveEvict, "training").Obj()
			p.Cards["card2"] = p.Cards["card"]
			q := p.Queues["general"]
			q.Flavors["card2"] = q.Flavors["card"]
			p.Queues["general"] = q
			b := p.Templates["bench"]
			b.AnyCard = true
			p.Templates["bench"] = b
			return p
		}(), admission.RuleExclusiveFits.ID, "bench may land on any of card, card2 (Kueue's flavor assignment: anyCard: true), but an exclusive step's request is sized from one card's quota"},
		{"the quota spans two nodes", func() *policy.Policy {
			p := exclusivePolicy(policy.ExclusiveEvict, "training").Obj()
			q := p.Queues["general"]
			f := q.Flavors["card"]
			f.Shares.Nominal = 16
			q.Flavors["card"] = f
			return p
		}(), admission.RuleExclusiveFits.ID, "the quota spans more than one node's cards"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := sizeErr(t, tc.p)
			if !slices.Contains(rules(ds), tc.rule) {
				t.Fatalf("findings %v, want %s", ds, tc.rule)
			}
			msgs := ""
			for _, d := range ds {
				msgs += d.Message + "\n"
				if d.Path != `templates.bench.exclusive` || d.Severity != finding.Error {
					t.Errorf("finding at %q, %s", d.Path, d.Severity)
				}
			}
			if !strings.Contains(msgs, tc.says) {
				t.Errorf("findings:\n%s\nwant one saying %q", msgs, tc.says)
			}
			if _, err := admission.Explain(tc.p); err == nil {
				t.Errorf("Explain accepted a policy whose exclusive template fails %s", tc.rule)
			}
		})
	}
}

// An on-demand service above the exclusive step's priority in its own
// queue evicts it rather than running beside it: that is not a finding,
// and explain says so.
func TestExclusiveEvictedByService(t *testing.T) {
	w := exclusivePolicy(policy.ExclusiveWait, "batch")
	w.Service(admissiontest.MakeService("llm").OnDemand(600).Namespace("svc").Queue("general").Card("card").Priority("top").Request(1, admissiontest.GiB(1), 1000))
	p := w.Obj()
	if ds := sizeErr(t, p); len(ds) != 0 {
		t.Fatalf("findings: %v", ds)
	}
	r := explain(t, p)
	down, _ := r.Exclusive[0].StateOf()
	var by []string
	for _, b := range down.EvictedBy {
		by = append(by, b.Workload+"@"+b.Priority)
	}
	if !slices.Contains(by, "llm@top") || len(down.Beside) != 0 {
		t.Errorf("llm down: evicted by %v, beside %v; want llm among those that evict it, nothing beside", by, down.Beside)
	}
	up, _ := r.Exclusive[0].StateOf("llm")
	// It waits for what can end, llm's scale-down, never for the
	// always-on model, whose quota it runs beside.
	if up.Outcome != "wait" || !slices.Equal(up.WaitsFor, []string{"llm"}) {
		t.Errorf("llm up: %s, waits for %v; want it to wait for llm alone", up.Outcome, up.WaitsFor)
	}
	if want := "bench with llm up: waits until llm scales down (short of "; !slices.ContainsFunc(r.Exclusive[0].Words, func(w string) bool { return strings.HasPrefix(w, want) }) {
		t.Errorf("words %q, want one starting %q", r.Exclusive[0].Words, want)
	}
}

// In a queue with two cards, jobs and services pinned to the other card
// run beside the exclusive step without touching its card: no
// exclusive-alone (they were once probed as if on its card), and the jobs
// it waits for or evicts are those on its card only.
func TestExclusiveOtherCardIsNotBeside(t *testing.T) {
	w := exclusivePolicy(policy.ExclusiveEvict, "training").
		CardNodeLabels("card", map[string]string{"gpu": "a"}).
		Card("card2", 16000, 8).CardNodeLabels("card2", map[string]string{"gpu": "b"})
	w.Template(admissiontest.MakeTemplate("other").Namespace("jobs").Queue("general").Card("card2").Request(1, admissiontest.GiB(1), 1000))
	w.Service(admissiontest.MakeService("model2").OnDemand(600).Namespace("svc").Queue("general").Card("card2").Priority("top").Request(1, admissiontest.GiB(1), 1000))
	p := w.Obj()
	q := p.Queues["general"]
	q.Flavors["card2"] = admissiontest.MakeFlavor("card2").Shares(8).HostMemory(admissiontest.GiB(16)).GPUMemory(16000).Obj()
	p.Queues["general"] = q
	if ds := sizeErr(t, p); len(ds) != 0 {
		t.Fatalf("findings for a step alone on its card: %v", ds)
	}
	r, err := admission.Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Exclusive) != 1 || r.Exclusive[0].Template != "bench" {
		t.Fatalf("exclusive section %+v, want bench", r.Exclusive)
	}
	x := r.Exclusive[0]
	for _, st := range x.States {
		for _, b := range st.Beside {
			t.Errorf("%s: %s beside the step", policy.StateLabel(st.State), b.Workload)
		}
		for _, run := range st.Running {
			if run.Template == "other" {
				t.Errorf("%s: the step meets running %s jobs, which are on card2", policy.StateLabel(st.State), run.Template)
			}
		}
	}
	if !x.Alone {
		t.Errorf("bench is not alone on card")
	}
}
