package admission

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// enumerate is the reference the analysis must agree with: every service
// state of the whole policy, one snapshot of every ClusterQueue per state,
// services admitted in the policy's order (always-on, then on-demand, by
// name), and the jobs simulated in it: no components, no memo.
func enumerate(p *policy.Policy) []Capacity {
	e := &explainer{p: p, ladder: p.Ladder(), onDemand: p.OnDemandServices()}
	for _, n := range p.ServiceNames() {
		if p.Services[n].Mode != policy.OnDemand {
			e.alwaysOn = append(e.alwaysOn, n)
		}
	}
	e.variants = variants(p)
	n := len(e.onDemand)
	type state struct {
		snap      *Snapshot
		reachable bool
		m         map[string]string
	}
	var states []state
	for mask := uint32(0); mask < 1<<n; mask++ {
		st := state{snap: NewSnapshot(p), reachable: true, m: map[string]string{}}
		admit := func(name string) {
			if _, ok := st.snap.queues[p.Services[name].Queue]; !ok {
				return
			}
			w := serviceWorkload(st.snap, p, name)
			if st.snap.Decide(w).Outcome != Admit {
				st.reachable = false
				return
			}
			st.snap.Add(w)
		}
		for _, s := range e.alwaysOn {
			admit(s)
		}
		for i, s := range e.onDemand {
			st.m[s] = policy.ServiceDown
			if e.up(mask, i) {
				st.m[s] = policy.ServiceUp
				admit(s)
			}
		}
		states = append(states, st)
	}
	var rows []Capacity
	for _, v := range e.variants {
		for _, pr := range e.ladder {
			for _, st := range states {
				rows = append(rows, e.row(v, pr, st.m, st.reachable, e.simulate(st.snap, v, pr)))
			}
		}
	}
	return rows
}

// randomPolicy builds a small policy: one or two cards, one to five
// queues in up to two cohorts (or none), always-on and on-demand services
// (some of equal effect), templates with locks, random quotas, limits and
// preemption settings.
func randomPolicy(r *rand.Rand, i int) *policy.Policy {
	w := admissiontest.MakePolicy(fmt.Sprintf("random-%d", i)).
		Priority("top", 1000).DefaultPriority("mid", 100).Priority("low", 50).Priority("bottom", 10).
		Lock("main", int64(1+r.Intn(6))).Lock("small", int64(1+r.Intn(2)), "main")
	cards := []string{"c0", "c1"}[:1+r.Intn(2)]
	for _, c := range cards {
		w.Card(c, 16384+int64(r.Intn(16384)), 8)
	}
	prios := []string{"top", "mid", "low", "bottom"}
	within := []string{"Never", "LowerPriority", "LowerOrNewerEqualPriority"}
	reclaim := []string{"Never", "LowerPriority", "Any"}
	nq := 1 + r.Intn(5)
	var queues []string
	for q := 0; q < nq; q++ {
		name := fmt.Sprintf("q%d", q)
		queues = append(queues, name)
		qw := admissiontest.MakeQueue(name)
		if k := r.Intn(3); k > 0 {
			qw.Cohort(fmt.Sprintf("co%d", k))
		}
		for _, c := range cards {
			if r.Intn(4) == 0 && len(cards) > 1 {
				continue
			}
			f := admissiontest.MakeFlavor(c).Shares(int64(r.Intn(9))).HostMemory(int64(r.Intn(6)) * 4096).GPUMemory(int64(r.Intn(6)) * 4096)
			for _, k := range policy.Kinds {
				switch r.Intn(4) {
				case 0:
					f.BorrowingLimit(k, int64(r.Intn(3))*f.Obj().Get(k).Nominal/2+int64(r.Intn(2)))
				case 1:
					f.LendingLimit(k, f.Obj().Get(k).Nominal/2)
				}
			}
			qw.Flavor(f)
		}
		qw.Preemption(within[r.Intn(3)], reclaim[r.Intn(3)])
		if r.Intn(3) == 0 {
			qw.Preemption(within[r.Intn(3)], "LowerPriority").BorrowWithinCohort("LowerPriority", prios[1+r.Intn(3)])
		}
		w.Queue(qw)
	}
	req := func() (int64, int64, int64) {
		return int64(1 + r.Intn(2)), int64(1+r.Intn(3)) * 1024, int64(1+r.Intn(6)) * 1024
	}
	for s := 0; s < r.Intn(3); s++ {
		a, b, c := req()
		w.Service(admissiontest.MakeService(fmt.Sprintf("always-%d", s)).Queue(queues[r.Intn(nq)]).
			Card(cards[r.Intn(len(cards))]).Priority(prios[r.Intn(2)]).Request(a, b, c))
	}
	var last *admissiontest.ServiceWrapper
	for s := 0; s < r.Intn(7); s++ {
		sw := admissiontest.MakeService(fmt.Sprintf("od-%d", s)).OnDemand(600)
		if last != nil && r.Intn(3) == 0 {
			// equal effect: same queue, card, priority and request
			o := last.Obj()
			sw.Queue(o.Queue).Card(o.Card).Priority(o.Priority).
				Request(o.Request.Shares, o.Request.HostMemoryMiB, o.Request.GPUMemoryMiB)
		} else {
			a, b, c := req()
			sw.Queue(queues[r.Intn(nq)]).Card(cards[r.Intn(len(cards))]).Priority(prios[r.Intn(4)]).Request(a, b, c)
		}
		w.Service(sw)
		last = sw
	}
	for t := 0; t < 1+r.Intn(3); t++ {
		a, b, c := req()
		tw := admissiontest.MakeTemplate(fmt.Sprintf("t%d", t)).Queue(queues[r.Intn(nq)]).
			Card(cards[r.Intn(len(cards))]).Request(a, b, c/2).TimeLimit(600)
		switch r.Intn(3) {
		case 1:
			tw.Locks("main")
		case 2:
			tw.Locks("small", "main").CacheFree(fmt.Sprintf("t%d-free", t), "main")
		}
		w.Template(tw)
	}
	return w.Obj()
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestAgreesWithEnumeration: on generated small policies the per-state
// rows built from components equal the whole-policy enumeration; every
// outlook's answers, starving sets and the starvation and lock findings
// follow from the enumeration; and the bounded search finds the same
// starving sets as the exact one (up to services of equal effect).
func TestAgreesWithEnumeration(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 120
	}
	for i := 0; i < seeds; i++ {
		r := rand.New(rand.NewSource(int64(i)))
		p := randomPolicy(r, i)
		t.Run(p.Name, func(t *testing.T) { agreesWithEnumeration(t, p) })
	}
}

// agreesWithEnumeration checks one policy: its rows equal the enumeration's,
// its outlooks and findings follow from it, and the bounded search finds
// what the exact one does.
func agreesWithEnumeration(t *testing.T, p *policy.Policy) {
	t.Helper()
	rep, err := ExplainWith(p, Options{States: StatesAll})
	if err != nil {
		t.Fatal(err)
	}
	ref := enumerate(p)
	if len(ref) != len(rep.Capacity) {
		t.Fatalf("%d rows, enumeration has %d", len(rep.Capacity), len(ref))
	}
	for k := range ref {
		if a, b := mustJSON(rep.Capacity[k]), mustJSON(ref[k]); a != b {
			t.Fatalf("row %d differs:\nanalysis:    %s\nenumeration: %s", k, a, b)
		}
	}
	checkOutlooks(t, rep, ref)
	checkFindings(t, rep, ref)

	bounded, err := ExplainWith(p, Options{States: StatesNone, searchAll: true})
	if err != nil {
		t.Fatal(err)
	}
	for k, o := range rep.Summary {
		b := bounded.Summary[k]
		if mustJSON(o.Best) != mustJSON(b.Best) || mustJSON(o.Worst) != mustJSON(b.Worst) || mustJSON(o.Effects) != mustJSON(b.Effects) {
			t.Errorf("%s at %s: bounded search's answers differ", o.Template, o.Priority)
		}
		if x, y := classVectors(o, o.StarvedBy), classVectors(o, b.StarvedBy); x != y {
			t.Errorf("%s at %s: starving sets: exact %v, bounded search %v (%s)", o.Template, o.Priority, o.StarvedBy, b.StarvedBy, b.Search.Note)
		}
	}
}

// classVectors canonicalizes starving sets: per set, how many of each
// equal-effect class it takes.
func classVectors(o Outlook, sets [][]string) string {
	class := map[string]string{}
	for _, s := range o.Services {
		class[s] = s
	}
	for _, cl := range o.EqualEffect {
		for _, s := range cl {
			class[s] = cl[0]
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, set := range sets {
		count := map[string]int{}
		for _, s := range set {
			count[class[s]]++
		}
		var parts []string
		for c, n := range count {
			parts = append(parts, fmt.Sprintf("%s×%d", c, n))
		}
		sort.Strings(parts)
		k := strings.Join(parts, "+")
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, " | ")
}

func refRow(ref []Capacity, template, prio string, up func(string) bool) *Capacity {
	for k := range ref {
		c := &ref[k]
		if c.Template != template || c.Priority != prio {
			continue
		}
		ok := true
		for s, v := range c.State {
			if (v == policy.ServiceUp) != up(s) {
				ok = false
				break
			}
		}
		if ok {
			return c
		}
	}
	return nil
}

func checkOutlooks(t *testing.T, rep *Report, ref []Capacity) {
	t.Helper()
	for _, o := range rep.Summary {
		in := func(set []string) func(string) bool {
			return func(s string) bool { return slices.Contains(set, s) }
		}
		check := func(what string, a Answer) {
			c := refRow(ref, o.Template, o.Priority, in(a.Up))
			if c == nil {
				t.Fatalf("%s %s: no enumerated row for %v", o.Template, o.Priority, a.Up)
			}
			// Reachability may differ where other components are
			// unreachable in this row's state; the numbers may not.
			if c.Admitted != a.Admitted || c.QuotaAdmits != a.QuotaAdmits || c.BoundBy != a.BoundBy ||
				mustJSON(c.Preemption) != mustJSON(a.Preemption) || mustJSON(c.Binding) != mustJSON(a.Binding) {
				t.Errorf("%s %s %s (%v up): outlook %+v, enumeration %+v", o.Template, o.Priority, what, a.Up, a, *c)
			}
		}
		check("best", o.Best)
		check("worst", o.Worst)
		for _, a := range o.Effects {
			check("effect", a)
		}
		// StarvedBy: the minimal sets of Services that starve it in some
		// reachable state of the policy (the others any way that is
		// reachable).
		var starving [][]string
		for k := range ref {
			c := &ref[k]
			if c.Template != o.Template || c.Priority != o.Priority || !starved(c) {
				continue
			}
			var up []string
			for _, s := range o.Services {
				if c.State[s] == policy.ServiceUp {
					up = append(up, s)
				}
			}
			starving = append(starving, up)
		}
		var minimal [][]string
		sort.SliceStable(starving, func(a, b int) bool { return len(starving[a]) < len(starving[b]) })
	next:
		for _, s := range starving {
			for _, m := range minimal {
				if subset(m, s) {
					continue next
				}
			}
			minimal = append(minimal, s)
		}
		if a, b := setsKey(o.StarvedBy), setsKey(minimal); a != b {
			t.Errorf("%s at %s: starvedBy %s, enumeration %s", o.Template, o.Priority, a, b)
		}
	}
}

func subset(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

func setsKey(sets [][]string) string {
	var out []string
	for _, s := range sets {
		out = append(out, "{"+strings.Join(s, ",")+"}")
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// checkFindings: starvation is reported for a priority exactly when some
// reachable enumerated row of a template starves, as an error exactly when
// every reachable row of one starves; a lock-capacity warning exactly when
// a reachable row's lock exceeds what Kueue admits.
func checkFindings(t *testing.T, rep *Report, ref []Capacity) {
	t.Helper()
	type agg struct{ starving, reachable int }
	byRow := map[[2]string]*agg{}
	wantStarve := map[string]string{}
	lockOver := map[string]bool{}
	for k := range ref {
		c := &ref[k]
		if !c.Reachable {
			continue
		}
		if c.Lock != nil && c.Lock.Effect == "exceeds" {
			lockOver[c.Lock.Name] = true
		}
		if c.CacheFree {
			continue
		}
		a := byRow[[2]string{c.Template, c.Priority}]
		if a == nil {
			a = &agg{}
			byRow[[2]string{c.Template, c.Priority}] = a
		}
		a.reachable++
		if starved(c) {
			a.starving++
		}
	}
	for k, a := range byRow {
		if a.starving == 0 {
			continue
		}
		sev := "warning"
		if a.starving == a.reachable {
			sev = "error"
		}
		if wantStarve[k[1]] != "error" {
			wantStarve[k[1]] = sev
		}
	}
	gotStarve := map[string]string{}
	gotLock := map[string]bool{}
	for _, f := range rep.Findings {
		switch f.Rule {
		case RuleStarvation.ID:
			prio := strings.Trim(strings.TrimPrefix(f.Path, "priorities."), `"`)
			if gotStarve[prio] != "error" {
				gotStarve[prio] = string(f.Severity)
			}
		case RuleLockCapacity.ID:
			if f.Severity == "warning" {
				gotLock[strings.Trim(strings.TrimSuffix(strings.TrimPrefix(f.Path, "locks."), ".size"), `"`)] = true
			}
		}
	}
	if mustJSON(gotStarve) != mustJSON(wantStarve) {
		t.Errorf("starvation findings %v, enumeration says %v", gotStarve, wantStarve)
	}
	if mustJSON(gotLock) != mustJSON(lockOver) {
		t.Errorf("lock-capacity warnings %v, enumeration says %v", gotLock, lockOver)
	}
}
