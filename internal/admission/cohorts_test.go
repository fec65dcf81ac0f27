package admission_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	. "github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// department is a two-level Cohort tree on card "c" (8 shares): the root
// "department" holds 2 shares of its own; its children "vision" and
// "language" hold none, and each has one ClusterQueue of 3 shares (vt,
// lt). lt reclaims from any lower priority. mod adjusts the Cohorts before
// the queues are added.
func department(mod func(w *PolicyWrapper)) *policy.Policy {
	w := MakePolicy("department").Card("c", 16384, 8).
		Priority("high", 100).DefaultPriority("low", 10).
		Cohort("department", "", MakeFlavor("c").Shares(2))
	if mod != nil {
		mod(w)
	} else {
		w.Cohort("vision", "department").Cohort("language", "department")
	}
	return w.
		Queue(MakeQueue("vt").Cohort("vision").Flavor(MakeFlavor("c").Shares(3)).Preemption("LowerPriority", "LowerPriority")).
		Queue(MakeQueue("lt").Cohort("language").Flavor(MakeFlavor("c").Shares(3)).Preemption("LowerPriority", "LowerPriority")).
		Obj()
}

// TestCohortTreeAvailable checks resource_node.go's available and
// potentialAvailable up a two-level tree against hand-computed values.
func TestCohortTreeAvailable(t *testing.T) {
	cases := map[string]struct {
		policy    *policy.Policy
		running   []running
		available map[string]int64
		potential map[string]int64
	}{
		"empty: each queue reaches the whole tree (2 + 3 + 3)": {
			policy:    department(nil),
			available: map[string]int64{"vt": 8, "lt": 8},
			potential: map[string]int64{"vt": 8, "lt": 8},
		},
		"vt borrows 3 through the parent: lt has the 2 left": {
			// vt's 6 bubble up: vision stores 6, department stores 6.
			policy:    department(nil),
			running:   []running{{"v1", "vt", "low", 6}},
			available: map[string]int64{"vt": 2, "lt": 2},
		},
		"language lends the department 1 of its 3: it keeps 2 for lt": {
			// language's SubtreeQuota 3, localQuota 3 - 1 = 2; the
			// department's SubtreeQuota 2 + 3 + 1 = 6.
			policy: department(func(w *PolicyWrapper) {
				w.Cohort("vision", "department").
					Cohort("language", "department", MakeFlavor("c").LendingLimit(policy.Shares, 1))
			}),
			running:   []running{{"v1", "vt", "low", 6}},
			available: map[string]int64{"vt": 0, "lt": 2},
			potential: map[string]int64{"vt": 6, "lt": 8},
		},
		"vision borrows at most 1 from the department": {
			// vision stores its 3 in the department; it may use 3 - 0 + 1.
			policy: department(func(w *PolicyWrapper) {
				w.Cohort("vision", "department", MakeFlavor("c").BorrowingLimit(policy.Shares, 1)).
					Cohort("language", "department")
			}),
			available: map[string]int64{"vt": 4, "lt": 8},
			potential: map[string]int64{"vt": 4, "lt": 8},
		},
		"a vision cohort with quota of its own pools it with vt's": {
			// vision's SubtreeQuota 1 + 3; the department's 2 + 4 + 3.
			policy: department(func(w *PolicyWrapper) {
				w.Cohort("vision", "department", MakeFlavor("c").Shares(1)).Cohort("language", "department")
			}),
			running:   []running{{"l1", "lt", "low", 5}},
			available: map[string]int64{"vt": 4, "lt": 4},
			potential: map[string]int64{"vt": 9, "lt": 9},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkAvailable(t, tc.policy, tc.running, tc.available, tc.potential)
		})
	}
	if got := admission.NewSnapshot(department(nil)).CohortQueues("vt"); len(got) != 2 || got[0] != "lt" || got[1] != "vt" {
		t.Errorf("CohortQueues(vt) = %v, want the whole tree [lt vt]", got)
	}
}

// checkAvailable admits running on p's snapshot and checks Available and
// PotentialAvailable of shares on card "c" per queue.
func checkAvailable(t *testing.T, p *policy.Policy, running []running, available, potential map[string]int64) {
	t.Helper()
	s := admission.NewSnapshot(p)
	admit(t, s, p, running)
	for q, want := range available {
		if got := s.Available(q, shares); got != want {
			t.Errorf("Available(%s) = %d, want %d", q, got, want)
		}
	}
	for q, want := range potential {
		if got := s.PotentialAvailable(q, shares); got != want {
			t.Errorf("PotentialAvailable(%s) = %d, want %d", q, got, want)
		}
	}
}

// TestCohortTreeReclaim follows classical.collectCandidatesForHierarchicalReclaim
// up the tree: lt, within its nominal quota, reclaims from vt in the
// sibling subtree once vision is above its SubtreeQuota; a vision within
// it is not a candidate, whoever borrows inside it.
func TestCohortTreeReclaim(t *testing.T) {
	cases := map[string]struct {
		running []running
		// the preemptor: queue, priority, shares
		queue, priority string
		ask             int64
		outcome         admission.Outcome
		targets         []string
		reason          string
	}{
		"lt reclaims its lent share from vt in the sibling subtree": {
			// vt 6 (vision 6 > 3), lt 2: the tree is full; lt + 1 ≤ 3.
			running: []running{{"v1", "vt", "low", 1}, {"v2", "vt", "low", 1}, {"v3", "vt", "low", 1},
				{"v4", "vt", "low", 1}, {"v5", "vt", "low", 1}, {"v6", "vt", "low", 1}, {"l1", "lt", "low", 2}},
			queue: "lt", priority: "high", ask: 1,
			outcome: admission.Preempt, targets: []string{"v6"}, reason: admission.ReasonInCohortReclamation,
		},
		"lt at or above its nominal quota waits: it has no advantage, and no borrowWithinCohort": {
			// vt 5, lt 3: lt + 1 > 3 (and nothing lower in lt itself).
			running: []running{{"v1", "vt", "low", 5}, {"l1", "lt", "high", 3}},
			queue:   "lt", priority: "high", ask: 1,
			outcome: admission.Wait,
		},
		"vt borrowing beyond its nominal waits: language is within its SubtreeQuota": {
			// lt 3 (language 3 ≤ 3), vt 5: vt asks one more.
			running: []running{{"l1", "lt", "low", 3}, {"v1", "vt", "high", 5}},
			queue:   "vt", priority: "high", ask: 1,
			outcome: admission.Wait,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := department(nil)
			s := admission.NewSnapshot(p)
			admit(t, s, p, tc.running)
			d := s.Decide(wl(s, p, "new", tc.queue, tc.priority, tc.ask))
			if d.Outcome != tc.outcome {
				t.Fatalf("outcome %s, want %s", d.Outcome, tc.outcome)
			}
			var got []string
			for _, x := range d.Targets {
				got = append(got, x.Workload.Name)
				if x.Reason != tc.reason {
					t.Errorf("%s evicted for %s, want %s", x.Workload.Name, x.Reason, tc.reason)
				}
			}
			if len(got) != len(tc.targets) || (len(got) > 0 && got[0] != tc.targets[0]) {
				t.Errorf("targets %v, want %v", got, tc.targets)
			}
		})
	}
}

// explainDepartment explains policies/department.
func explainDepartment(t *testing.T) *admission.Report {
	t.Helper()
	p, err := policy.Load("../../policies/department")
	if err != nil {
		t.Fatal(err)
	}
	r, err := admission.Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDepartmentExplain checks explain's rows for policies/department
// (hand-computed, and matched against the real Kueue by
// test/crosscheck TestCrossCheckCohortTree): train jobs borrow through the
// department (7 shares: vision-train's 5 and the 2 the vision Cohort's
// borrowingLimit lets it take from the rest of the tree, of the
// department's 2 and language's 1); with the 7B up, 4,111 MiB of GPU
// memory is left (4 jobs), and a job at training, within vision-train's
// own quota, reclaims from the language subtree by evicting the 7B (7
// then); one at the 7B's priority waits.
func TestDepartmentExplain(t *testing.T) {
	r := explainDepartment(t)
	type want struct {
		quota, withPreemption int64
		evicts                string
	}
	wants := map[string]want{
		"training/down":      {7, -1, ""},
		"training/up":        {4, 7, "qwen2-5-7b " + admission.ReasonInCohortReclamation},
		"on-demand-llm/down": {7, -1, ""},
		"on-demand-llm/up":   {4, -1, ""},
	}
	seen := 0
	for _, row := range r.Capacity {
		key := row.Priority + "/" + row.State["qwen2-5-7b"]
		w, ok := wants[key]
		if !ok || row.Template != "train" {
			t.Errorf("unexpected row %s %s", row.Template, key)
			continue
		}
		seen++
		if row.QuotaAdmits != w.quota {
			t.Errorf("%s: %d admitted without preemption, want %d", key, row.QuotaAdmits, w.quota)
		}
		switch {
		case w.withPreemption < 0 && row.Preemption != nil:
			t.Errorf("%s: a preemption path %+v, want none", key, row.Preemption)
		case w.withPreemption >= 0 && row.Preemption == nil:
			t.Errorf("%s: no preemption path, want %d by evicting %s", key, w.withPreemption, w.evicts)
		case w.withPreemption >= 0:
			var ev string
			for _, e := range row.Preemption.Evicts {
				ev += e.Service + " " + e.Reason
			}
			if row.Preemption.QuotaAdmits != w.withPreemption || ev != w.evicts {
				t.Errorf("%s: with preemption %d evicting %q, want %d evicting %q", key, row.Preemption.QuotaAdmits, ev, w.withPreemption, w.evicts)
			}
		}
	}
	if seen != len(wants) {
		t.Errorf("%d rows, want %d", seen, len(wants))
	}
}

// TestDepartmentCohortTree: explain's cohorts section for
// policies/department: the department's own pool over vision (a shares
// borrowingLimit of 2, vision-train) and language (no quota,
// language-serve), in JSON and in the text tree.
func TestDepartmentCohortTree(t *testing.T) {
	r := explainDepartment(t)
	str := func(s *string) string {
		if s == nil {
			return "-"
		}
		return *s
	}
	var got []string
	for _, c := range r.Cohorts {
		line := fmt.Sprintf("%s parent=%q children=%v queues=%v", c.Name, c.Parent, c.Children, c.Queues)
		for _, f := range c.Flavors {
			for _, q := range f.Resources {
				line += fmt.Sprintf(" %s/%s=%s,%s,%s", f.Card, q.Name, q.NominalQuota, str(q.BorrowingLimit), str(q.LendingLimit))
			}
		}
		got = append(got, line)
	}
	want := []string{
		`department parent="" children=[language vision] queues=[] rtx-5060-ti/nvidia.com/gpu=2,-,- rtx-5060-ti/memory=8Gi,-,- rtx-5060-ti/gpupolicy.dev/gpu-memory=4Gi,-,-`,
		`language parent="department" children=[] queues=[language-serve]`,
		`vision parent="department" children=[] queues=[vision-train] rtx-5060-ti/nvidia.com/gpu=0,2,- rtx-5060-ti/memory=0,-,- rtx-5060-ti/gpupolicy.dev/gpu-memory=0,-,-`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("cohorts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	tree := "  department: on rtx-5060-ti 2 shares, 8Gi memory, 4Gi gpu-memory\n" +
		"    language: no quota of its own; queues language-serve\n" +
		"    vision: on rtx-5060-ti 0 shares (borrowingLimit 2), 0 memory, 0 gpu-memory; queues vision-train\n"
	if !strings.Contains(b.String(), tree) {
		t.Errorf("text lacks the tree:\n%s\nin:\n%s", tree, b.String())
	}
	// A policy without Cohort objects has an empty section, and no text.
	r, err := admission.Explain(twoCardPolicy(MakeQueue("q").Flavor(ample(MakeFlavor("a"), 2)).Flavor(ample(MakeFlavor("b"), 3))))
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if r.Cohorts == nil || len(r.Cohorts) != 0 || strings.Contains(b.String(), "Cohorts (") {
		t.Errorf("no Cohort objects: cohorts %v, text:\n%s", r.Cohorts, b.String())
	}
}
