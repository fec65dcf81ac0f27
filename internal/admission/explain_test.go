package admission_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	. "github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// ladder3 is a three-rung ladder on one card "c" (16 shares, 24 GiB).
func ladder3(name string) *PolicyWrapper {
	return MakePolicy(name).Card("c", 24576, 16).
		Priority("high", 100).DefaultPriority("mid", 50).Priority("low", 10)
}

func TestExplainScenarios(t *testing.T) {
	type rowWant struct {
		template, priority string
		up                 []string
		admitted, quota    int64
		boundBy            string
		binding            []string
		lockEffect         string
		margin             map[string]string
		preemptAdmits      int64 // -1: no preemption path
		evicts             []string
	}
	type findingWant struct {
		rule, severity, path string
		says                 []string
	}
	cases := map[string]struct {
		policy      *policy.Policy
		rows        []rowWant
		findings    []findingWant
		notFindings []string // "rule path" that must not appear
	}{
		"lock smaller than the quota leaves quota idle": {
			policy: ladder3("small-lock").Lock("main", 2).
				Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(8).HostMemory(GiB(64)).GPUMemory(24576))).
				Template(MakeTemplate("t").Queue("q").Card("c").Locks("main").Request(1, GiB(2), 1024)).Obj(),
			rows: []rowWant{{template: "t", priority: "low", admitted: 2, quota: 8, boundBy: "lock",
				binding: []string{"nvidia.com/gpu"}, lockEffect: "limits", preemptAdmits: -1,
				margin: map[string]string{"nvidia.com/gpu": "6", "memory": "60Gi", "gpupolicy.dev/gpu-memory": "22Gi"}}},
			findings: []findingWant{{"lock-capacity", "info", "locks.main.size", []string{"main lock (2)", "(8 with every service up (all are always-on))", "6 jobs' worth"}}},
		},
		"lock larger than the quota is held by waiting jobs": {
			policy: ladder3("big-lock").Lock("main", 4).
				Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(2).HostMemory(GiB(64)).GPUMemory(24576))).
				Template(MakeTemplate("t").Queue("q").Card("c").Locks("main").Request(1, GiB(2), 1024)).Obj(),
			rows: []rowWant{{template: "t", priority: "mid", admitted: 2, quota: 2, boundBy: "quota",
				binding: []string{"nvidia.com/gpu"}, lockEffect: "exceeds", preemptAdmits: -1}},
			findings: []findingWant{{"lock-capacity", "warning", "locks.main.size", []string{"larger than", "2 of the main lock's 4 slots", "waits at the lock"}}},
		},
		"cohort of three with a lending limit": {
			// a lends 2 of 6 (keeps 4); b owns 4; z owns none and runs an
			// on-demand service asking 2 shares. a's jobs: local 4 + pool
			// (2 + 4) = 10 with z's service down, 8 with it up.
			policy: ladder3("lending").
				Queue(MakeQueue("a").Cohort("co").Flavor(MakeFlavor("c").Shares(6).HostMemory(GiB(64)).GPUMemory(24576).
					LendingLimit(policy.Shares, 2))).
				Queue(MakeQueue("b").Cohort("co").Flavor(MakeFlavor("c").Shares(4).HostMemory(GiB(8)))).
				Queue(MakeQueue("z").Cohort("co").Flavor(MakeFlavor("c").BorrowingLimit(policy.Shares, 3).
					BorrowingLimit(policy.HostMemory, GiB(8)).BorrowingLimit(policy.GPUMemory, 4096))).
				Service(MakeService("llm").OnDemand(600).Queue("z").Card("c").Priority("mid").Request(2, GiB(2), 2048)).
				Template(MakeTemplate("ta").Queue("a").Card("c").Request(1, 0, 0)).
				Template(MakeTemplate("tb").Queue("b").Card("c").Request(1, 0, 0)).Obj(),
			rows: []rowWant{
				{template: "ta", priority: "low", admitted: 10, quota: 10, boundBy: "quota", binding: []string{"nvidia.com/gpu"}, preemptAdmits: -1},
				{template: "ta", priority: "low", up: []string{"llm"}, admitted: 8, quota: 8, boundBy: "quota", binding: []string{"nvidia.com/gpu"}, preemptAdmits: -1},
				// b's jobs can use b's 4 and a's lendable 2, never a's local 4.
				{template: "tb", priority: "low", admitted: 6, quota: 6, boundBy: "quota", binding: []string{"nvidia.com/gpu"}, preemptAdmits: -1},
				{template: "tb", priority: "low", up: []string{"llm"}, admitted: 4, quota: 4, boundBy: "quota", binding: []string{"nvidia.com/gpu"}, preemptAdmits: -1},
			},
		},
		"two flavors: a service on one card leaves the other alone": {
			policy: ladder3("two-cards").Card("d", 16311, 4).
				Queue(MakeQueue("q").Cohort("co").
					Flavor(MakeFlavor("c").Shares(16).HostMemory(GiB(64)).GPUMemory(24576)).
					Flavor(MakeFlavor("d").Shares(4).HostMemory(GiB(16)).GPUMemory(16311))).
				Queue(MakeQueue("llm-q").Cohort("co").Flavor(MakeFlavor("c").BorrowingLimit(policy.Shares, 8).
					BorrowingLimit(policy.HostMemory, GiB(32)).BorrowingLimit(policy.GPUMemory, 20000))).
				Service(MakeService("llm").OnDemand(3600).Queue("llm-q").Card("c").Priority("high").Request(8, GiB(8), 20000)).
				Template(MakeTemplate("on-c").Queue("q").Card("c").Request(1, GiB(1), 1024)).
				Template(MakeTemplate("on-d").Queue("q").Card("d").Request(1, GiB(1), 1024)).Obj(),
			rows: []rowWant{
				{template: "on-c", priority: "low", admitted: 16, quota: 16, boundBy: "quota", binding: []string{"nvidia.com/gpu"}, preemptAdmits: -1},
				{template: "on-c", priority: "low", up: []string{"llm"}, admitted: 4, quota: 4, boundBy: "quota", binding: []string{"gpupolicy.dev/gpu-memory"}, preemptAdmits: -1,
					margin: map[string]string{"gpupolicy.dev/gpu-memory": "480Mi"}},
				{template: "on-d", priority: "low", up: []string{"llm"}, admitted: 4, quota: 4, boundBy: "quota", binding: []string{"nvidia.com/gpu"}, preemptAdmits: -1},
			},
			findings: []findingWant{
				{"declared-physical", "info", `cards.c.memoryMiB`, []string{"24,576 MiB", "the services and 4 on-c jobs, while llm is up"}},
				{"declared-physical", "info", `cards.d.memoryMiB`, []string{"16,311 MiB"}},
			},
			notFindings: []string{"starvation priorities.low"},
		},
		"an on-demand service that takes the GPU memory starves the jobs until it scales down": {
			policy: ladder3("starve").
				Queue(MakeQueue("q").Cohort("co").Flavor(MakeFlavor("c").Shares(16).HostMemory(GiB(64)).GPUMemory(16384)).
					Preemption("LowerPriority", "LowerPriority")).
				Queue(MakeQueue("llm-q").Cohort("co").Flavor(MakeFlavor("c").BorrowingLimit(policy.Shares, 8).
					BorrowingLimit(policy.HostMemory, GiB(32)).BorrowingLimit(policy.GPUMemory, 16384))).
				Service(MakeService("llm").OnDemand(900).Queue("llm-q").Card("c").Priority("mid").Request(1, GiB(8), 16000)).
				Template(MakeTemplate("t").Queue("q").Card("c").TimeLimit(600).Request(1, GiB(1), 1024)).Obj(),
			rows: []rowWant{
				{template: "t", priority: "low", up: []string{"llm"}, admitted: 0, quota: 0, binding: []string{"gpupolicy.dev/gpu-memory"},
					margin: map[string]string{"gpupolicy.dev/gpu-memory": "384Mi"}, preemptAdmits: -1},
				{template: "t", priority: "high", up: []string{"llm"}, admitted: 0, quota: 0, preemptAdmits: 16, evicts: []string{"llm"}},
			},
			findings: []findingWant{
				{"starvation", "warning", "priorities.low", []string{"while llm is up", "384 MiB", "activeDeadlineSeconds 600 s", "llm scales down, 900 s after its last request"}},
				{"starvation", "warning", "priorities.mid", []string{"while llm is up"}},
			},
			notFindings: []string{"starvation priorities.high"},
		},
		"quotas that admit more declarations than the card holds": {
			policy: MakePolicy("over").Card("c", 16311, 8).DefaultPriority("low", 10).
				Queue(MakeQueue("a").Flavor(MakeFlavor("c").Shares(4).HostMemory(GiB(16)).GPUMemory(12000))).
				Queue(MakeQueue("b").Flavor(MakeFlavor("c").Shares(4).HostMemory(GiB(16)).GPUMemory(12000))).
				Template(MakeTemplate("t").Queue("a").Card("c").Request(1, GiB(1), 1024)).Obj(),
			findings: []findingWant{{"declared-physical", "warning", "cards.c.memoryMiB", []string{"24,000 MiB", "7,689 MiB more than the card holds"}}},
		},
		"three priorities in a shared cohort: borrowWithinCohort fires": {
			// owner owns the card; b1 runs low jobs on borrowed quota; b2's
			// service borrows and may evict them.
			policy: ladder3("shared").
				Queue(MakeQueue("owner").Cohort("co").Flavor(MakeFlavor("c").Shares(4).HostMemory(GiB(16)).GPUMemory(16384)).
					Preemption("LowerPriority", "LowerPriority")).
				Queue(MakeQueue("b1").Cohort("co").Flavor(MakeFlavor("c").BorrowingLimit(policy.Shares, 4).
					BorrowingLimit(policy.HostMemory, GiB(16)).BorrowingLimit(policy.GPUMemory, 16384))).
				Queue(MakeQueue("b2").Cohort("co").Flavor(MakeFlavor("c").BorrowingLimit(policy.Shares, 1).
					BorrowingLimit(policy.HostMemory, GiB(4)).BorrowingLimit(policy.GPUMemory, 8192)).
					Preemption("Never", "LowerPriority").BorrowWithinCohort("LowerPriority", "low")).
				Service(MakeService("llm").OnDemand(3600).Queue("b2").Card("c").Priority("mid").Request(1, GiB(4), 8192)).
				Template(MakeTemplate("step").Queue("b1").Card("c").Request(1, GiB(2), 1024)).Obj(),
			rows: []rowWant{
				{template: "step", priority: "low", admitted: 4, quota: 4, boundBy: "quota", binding: []string{"nvidia.com/gpu"}, preemptAdmits: -1},
				{template: "step", priority: "low", up: []string{"llm"}, admitted: 3, quota: 3, boundBy: "quota", binding: []string{"nvidia.com/gpu"}, preemptAdmits: -1},
				// A high job in b1 cannot evict the service: b1 has no
				// reclaimWithinCohort. It gets the 3 shares left.
				{template: "step", priority: "high", up: []string{"llm"}, admitted: 3, quota: 3, boundBy: "quota", binding: []string{"nvidia.com/gpu"}, preemptAdmits: -1},
			},
			notFindings: []string{`dead-preemption queues.b2.preemption.borrowWithinCohort`, "preemption-rejected queues.b2.preemption"},
		},
		"reclaimWithinCohort on a queue that owns nothing is dead": {
			policy: ladder3("nothing-to-reclaim").
				Queue(MakeQueue("owner").Cohort("co").Flavor(MakeFlavor("c").Shares(4).HostMemory(GiB(16)).GPUMemory(16384))).
				Queue(MakeQueue("borrower").Cohort("co").Flavor(MakeFlavor("c").BorrowingLimit(policy.Shares, 4).
					BorrowingLimit(policy.HostMemory, GiB(16)).BorrowingLimit(policy.GPUMemory, 16384)).
					Preemption("Never", "Any")).
				Template(MakeTemplate("t").Queue("owner").Card("c").Request(1, GiB(1), 1024)).
				Template(MakeTemplate("u").Queue("borrower").Card("c").Request(1, GiB(1), 1024)).Obj(),
			findings: []findingWant{{"dead-preemption", "error", "queues.borrower.preemption.reclaimWithinCohort",
				[]string{"nominal quota is 0", "nothing to reclaim"}}},
		},
		"withinClusterQueue with a single priority is dead": {
			policy: ladder3("one-priority").
				Queue(MakeQueue("svc").Flavor(MakeFlavor("c").Shares(4).HostMemory(GiB(16)).GPUMemory(16384)).Preemption("LowerPriority", "Never")).
				Service(MakeService("a").Queue("svc").Card("c").Priority("high").Request(1, GiB(1), 1024)).
				Service(MakeService("b").Queue("svc").Card("c").Priority("high").Request(1, GiB(1), 1024)).Obj(),
			findings: []findingWant{{"dead-preemption", "error", "queues.svc.preemption.withinClusterQueue", []string{"only one priority"}}},
		},
		"a job that can never fit starves in every state: error": {
			policy: ladder3("too-big").
				Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(2).HostMemory(GiB(16)).GPUMemory(16384))).
				Template(MakeTemplate("t").Queue("q").Card("c").Request(4, GiB(1), 1024)).Obj(),
			rows: []rowWant{{template: "t", priority: "high", admitted: 0, quota: 0, boundBy: "never-fits",
				binding: []string{"nvidia.com/gpu"}, preemptAdmits: -1}},
			findings: []findingWant{{"starvation", "error", "priorities.high", []string{"in every service state", "can never hold more than 2 shares", "Nothing ends the wait"}}},
		},
		"a service the quota cannot admit": {
			policy: ladder3("unadmitted").
				Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(2).HostMemory(GiB(16)).GPUMemory(4096))).
				Service(MakeService("a").Queue("q").Card("c").Priority("high").Request(1, GiB(1), 3000)).
				Service(MakeService("b").OnDemand(60).Queue("q").Card("c").Priority("high").Request(1, GiB(1), 3000)).
				Template(MakeTemplate("t").Queue("q").Card("c").Request(1, GiB(1), 1)).Obj(),
			rows: []rowWant{{template: "t", priority: "low", up: []string{"b"}, admitted: 1, quota: 1, boundBy: "quota",
				binding: []string{"nvidia.com/gpu"}, preemptAdmits: -1}},
			findings: []findingWant{{"service-unadmitted", "error", "services.b", []string{"gpupolicy.dev/gpu-memory", "b is up"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := explain(t, tc.policy)
			for _, w := range tc.rows {
				c := row(t, r, w.template, w.priority, w.up...)
				if c.Admitted != w.admitted || c.QuotaAdmits != w.quota {
					t.Errorf("%s at %s %v: admitted %d (quota %d), want %d (quota %d)", w.template, w.priority, w.up, c.Admitted, c.QuotaAdmits, w.admitted, w.quota)
				}
				if w.boundBy != "" && c.BoundBy != w.boundBy {
					t.Errorf("%s at %s %v: bound by %s, want %s", w.template, w.priority, w.up, c.BoundBy, w.boundBy)
				}
				if w.binding != nil && !slices.Equal(c.Binding, w.binding) {
					t.Errorf("%s at %s %v: binding %v, want %v", w.template, w.priority, w.up, c.Binding, w.binding)
				}
				if w.lockEffect != "" && (c.Lock == nil || c.Lock.Effect != w.lockEffect) {
					t.Errorf("%s at %s %v: lock %+v, want effect %s", w.template, w.priority, w.up, c.Lock, w.lockEffect)
				}
				for res, q := range w.margin {
					if c.Margin[res] != q {
						t.Errorf("%s at %s %v: margin %s = %q, want %q", w.template, w.priority, w.up, res, c.Margin[res], q)
					}
				}
				switch {
				case w.preemptAdmits < 0 && c.Preemption != nil:
					t.Errorf("%s at %s %v: unexpected preemption path %+v", w.template, w.priority, w.up, c.Preemption)
				case w.preemptAdmits >= 0 && w.evicts != nil:
					if c.Preemption == nil || c.Preemption.Admitted != w.preemptAdmits {
						t.Fatalf("%s at %s %v: preemption %+v, want %d admitted", w.template, w.priority, w.up, c.Preemption, w.preemptAdmits)
					}
					var got []string
					for _, ev := range c.Preemption.Evicts {
						got = append(got, ev.Workload)
					}
					if !slices.Equal(got, w.evicts) {
						t.Errorf("%s at %s %v: evicts %v, want %v", w.template, w.priority, w.up, got, w.evicts)
					}
				}
			}
			for _, w := range tc.findings {
				f := findingAt(t, r, w.rule, w.path)
				if string(f.Severity) != w.severity {
					t.Errorf("%s %s: severity %s, want %s", w.rule, w.path, f.Severity, w.severity)
				}
				mustContain(t, w.rule, f.Message, w.says...)
			}
			for _, nf := range tc.notFindings {
				for _, f := range r.Findings {
					if f.Rule+" "+f.Path == nf {
						t.Errorf("unexpected %s: %s", nf, f.Message)
					}
				}
			}
		})
	}
}

func TestExplainTooManyServices(t *testing.T) {
	w := ladder3("many").Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(64)))
	for i := 0; i <= admission.MaxOnDemand; i++ {
		w.Service(MakeService(string(rune('a' + i))).OnDemand(60).Queue("q").Card("c").Priority("low"))
	}
	if _, err := admission.ExplainWith(w.Obj(), admission.Options{States: admission.StatesAll}); err == nil ||
		!strings.Contains(err.Error(), "on-demand services") || !strings.Contains(err.Error(), "stop at 16") {
		t.Fatalf("err = %v, want a too-many-services error naming the limit", err)
	}
	// The default analysis answers without enumerating the states.
	r, err := admission.Explain(w.Obj())
	if err != nil {
		t.Fatal(err)
	}
	if r.States.Enumerated || len(r.Capacity) != 0 || len(r.Summary) != 0 {
		t.Errorf("states %+v, %d rows, %d outlooks: want no rows and no outlooks (no templates)", r.States, len(r.Capacity), len(r.Summary))
	}
}

func TestExplainNoOnDemandServices(t *testing.T) {
	p := ladder3("static").
		Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(4).HostMemory(GiB(16)).GPUMemory(16384))).
		Template(MakeTemplate("t").Queue("q").Card("c").Request(1, GiB(1), 1024)).Obj()
	r := explain(t, p)
	if len(r.Capacity) != 3 {
		t.Fatalf("%d rows, want one per priority", len(r.Capacity))
	}
	for _, c := range r.Capacity {
		if len(c.State) != 0 || c.Admitted != 4 {
			t.Errorf("row %+v: want an empty state and 4 admitted", c)
		}
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
}

// TestGeneratedPolicyIsSane keeps the benchmark's policy meaningful: it
// passes the policy rules and every state is reachable.
func TestGeneratedPolicyIsSane(t *testing.T) {
	p := Generated(100)
	if ds := p.Check(); len(ds) > 0 {
		t.Fatalf("generated policy fails vet: %v", ds)
	}
	r := explain(t, p)
	if got, want := len(r.Capacity), 100*4*16; got != want {
		t.Errorf("%d rows, want %d (100 templates × 4 priorities × 16 states)", got, want)
	}
	for _, c := range r.Capacity {
		if !c.Reachable {
			t.Fatalf("unreachable row %+v", c)
		}
	}
	for _, f := range r.Findings {
		if f.Rule == "service-unadmitted" {
			t.Errorf("generated policy: %s", f.Message)
		}
	}
}
