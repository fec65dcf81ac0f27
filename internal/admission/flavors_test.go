package admission_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	. "github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// twoCardPolicy: card a (node labels) and card b (none), a queue q with
// both, a on b's left, and two templates: "any" (anyCard) and "pin-a"
// (pinned to a by its nodeLabels). Only shares bind.
func twoCardPolicy(q *QueueWrapper, extra ...*QueueWrapper) *policy.Policy {
	w := MakePolicy("two-cards").Card("a", 16311, 8).Card("b", 16311, 8).CardNodeLabels("b", nil).
		Priority("high", 100).DefaultPriority("low", 10).
		Queue(q.Namespaces("experiments")).
		Template(MakeTemplate("any").Queue("q").Card("a").AnyCard().Request(1, GiB(1), 1000)).
		Template(MakeTemplate("pin-a").Queue("q").Card("a").Request(1, GiB(1), 1000))
	for _, e := range extra {
		w = w.Queue(e)
	}
	return w.Obj()
}

func ample(f *FlavorWrapper, shares int64) *FlavorWrapper {
	return f.Shares(shares).HostMemory(GiB(64)).GPUMemory(100000)
}

func job(s *admission.Snapshot, p *policy.Policy, tmpl, prio string) *admission.Workload {
	t := p.Templates[tmpl]
	pr := p.Priorities[prio]
	return s.NewWorkload(admission.Workload{Name: tmpl + " job", Template: tmpl, Queue: t.Queue, Card: t.Card,
		Priority: pr.Name, Value: pr.Value, Request: t.Request})
}

// fill admits jobs of tmpl at prio one by one while Decide admits them, and
// returns the card each got.
func fill(s *admission.Snapshot, p *policy.Policy, tmpl, prio string) []string {
	var landed []string
	for len(landed) < 100 {
		w := job(s, p, tmpl, prio)
		if s.Decide(w).Outcome != admission.Admit {
			return landed
		}
		s.Add(w)
		landed = append(landed, w.Card)
	}
	return landed
}

func TestCardChoice(t *testing.T) {
	p := twoCardPolicy(MakeQueue("q").Flavor(ample(MakeFlavor("a"), 2)).Flavor(ample(MakeFlavor("b"), 3)))
	if got := p.TemplateCards(p.Templates["any"]); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("anyCard: cards %v, want [a b]", got)
	}
	if got := p.TemplateCards(p.Templates["pin-a"]); !slices.Equal(got, []string{"a"}) {
		t.Errorf("pinned to a: cards %v, want [a]", got)
	}
	// Declared b first: Kueue tries b first.
	p = twoCardPolicy(MakeQueue("q").Flavor(ample(MakeFlavor("b"), 3)).Flavor(ample(MakeFlavor("a"), 2)))
	if got := p.TemplateCards(p.Templates["any"]); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("b declared first: cards %v, want [b a]", got)
	}
	// A template pinned to b, which has no nodeLabels, pins nothing.
	tb := p.Templates["pin-a"]
	tb.Card = "b"
	if got := p.TemplateCards(tb); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("card b without labels: cards %v, want [b a]", got)
	}
}

// TestFlavorFillsInOrder: the first card fills, then the next; explain's
// row says where the jobs land.
func TestFlavorFillsInOrder(t *testing.T) {
	p := twoCardPolicy(MakeQueue("q").Flavor(ample(MakeFlavor("a"), 2)).Flavor(ample(MakeFlavor("b"), 3)))
	if got := fill(admission.NewSnapshot(p), p, "any", "low"); !slices.Equal(got, []string{"a", "a", "b", "b", "b"}) {
		t.Errorf("landed %v, want a a b b b", got)
	}
	r, err := admission.Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range r.Capacity {
		if row.Template != "any" {
			if row.Cards != nil {
				t.Errorf("pinned %s has cards %v", row.Template, row.Cards)
			}
			continue
		}
		if row.QuotaAdmits != 5 || len(row.Cards) != 2 || row.Cards[0].Admitted != 2 || row.Cards[1].Admitted != 3 {
			t.Errorf("row %s at %s: %d admitted, cards %+v; want 5: a 2, b 3", row.Template, row.Priority, row.QuotaAdmits, row.Cards)
		}
		if row.Cards[0].Margin["nvidia.com/gpu"] != "0" || row.PerResource["nvidia.com/gpu"] != 5 {
			t.Errorf("row %s: margin on a %v, per resource %v", row.Template, row.Cards[0].Margin, row.PerResource)
		}
	}
}

// TestFlavorWhenCanBorrow: q holds 1 share of a and 2 of b, and may borrow
// 2 more of a from l. MayStopSearch stays on a while it can borrow there;
// TryNextFlavor takes b, which fits without borrowing, first.
func TestFlavorWhenCanBorrow(t *testing.T) {
	for _, tc := range []struct {
		borrow string
		want   []string
	}{
		{policy.MayStopSearch, []string{"a", "a", "a", "b", "b"}},
		{policy.TryNextFlavor, []string{"a", "b", "b", "a", "a"}},
	} {
		p := twoCardPolicy(MakeQueue("q").Cohort("co").FlavorFungibility(tc.borrow, policy.TryNextFlavor).
			Flavor(ample(MakeFlavor("a"), 1)).Flavor(ample(MakeFlavor("b"), 2)),
			MakeQueue("l").Cohort("co").Namespaces("lender").Flavor(ample(MakeFlavor("a"), 2)))
		if got := fill(admission.NewSnapshot(p), p, "any", "low"); !slices.Equal(got, tc.want) {
			t.Errorf("whenCanBorrow %s: landed %v, want %v", tc.borrow, got, tc.want)
		}
	}
}

// TestFlavorWhenCanPreempt: a is full of low jobs pinned to it, b is free.
// A high job tries b (TryNextFlavor) or preempts on a (MayStopSearch).
func TestFlavorWhenCanPreempt(t *testing.T) {
	for _, preempt := range []string{policy.TryNextFlavor, policy.MayStopSearch} {
		p := twoCardPolicy(MakeQueue("q").Preemption("LowerPriority", "Never").FlavorFungibility(policy.MayStopSearch, preempt).
			Flavor(ample(MakeFlavor("a"), 2)).Flavor(ample(MakeFlavor("b"), 2)))
		s := admission.NewSnapshot(p)
		if got := fill(s, p, "pin-a", "low"); !slices.Equal(got, []string{"a", "a"}) {
			t.Fatalf("pin-a landed %v, want a a", got)
		}
		w := job(s, p, "any", "high")
		d := s.Decide(w)
		switch preempt {
		case policy.TryNextFlavor:
			if d.Outcome != admission.Admit || w.Card != "b" {
				t.Errorf("TryNextFlavor: %s on %s, want admit on b", d.Outcome, w.Card)
			}
		default:
			if d.Outcome != admission.Preempt || w.Card != "a" || len(d.Targets) != 1 ||
				d.Targets[0].Workload.Template != "pin-a" || d.Targets[0].Reason != admission.ReasonInClusterQueue {
				t.Fatalf("MayStopSearch: %s on %s, targets %v; want one pin-a job preempted on a", d.Outcome, w.Card, d.Targets)
			}
			s.Remove(d.Targets[0].Workload)
			if d := s.Decide(w); d.Outcome != admission.Admit || w.Card != "a" {
				t.Errorf("MayStopSearch after the eviction: %s on %s, want admit on a", d.Outcome, w.Card)
			}
		}
	}
}

// TestFlavorNoCandidatesTriesNext: preemption without candidates never
// stops the search, whatever whenCanPreempt says; with no card left the
// job waits.
func TestFlavorNoCandidatesTriesNext(t *testing.T) {
	p := twoCardPolicy(MakeQueue("q").FlavorFungibility(policy.MayStopSearch, policy.MayStopSearch).
		Flavor(ample(MakeFlavor("a"), 1)).Flavor(ample(MakeFlavor("b"), 1)))
	s := admission.NewSnapshot(p)
	if got := fill(s, p, "any", "low"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("landed %v, want a b", got)
	}
	if d := s.Decide(job(s, p, "any", "high")); d.Outcome != admission.Wait {
		t.Errorf("third job: %s, want wait", d.Outcome)
	}
}

func TestCardAnyFlavorWarning(t *testing.T) {
	p := twoCardPolicy(MakeQueue("q").Flavor(ample(MakeFlavor("a"), 2)).Flavor(ample(MakeFlavor("b"), 3)))
	if ws := p.Warnings(); len(ws) != 0 {
		t.Errorf("warnings for pinned and anyCard templates: %v", ws)
	}
	tb := p.Templates["pin-a"]
	tb.Card = "b"
	p.Templates["pin-a"] = tb
	ws := p.Warnings()
	if len(ws) != 1 || ws[0].Rule != policy.RuleCardAnyFlavor.ID || ws[0].Severity != "warning" || ws[0].Path != policy.PathString("templates", "pin-a", "card") {
		t.Fatalf("warnings %+v, want one card-any-flavor warning on templates.pin-a.card", ws)
	}
	t.Log(ws[0].Message)
}

// TestFlavorRowEvictsOnCard: an always-on low service fills card a; b is
// free. With whenCanPreempt MayStopSearch the first high job stops at a,
// where it can preempt: no job is admitted without evicting the service,
// and the row's preemption path says it is evicted on a. With
// TryNextFlavor two jobs land on b first.
func TestFlavorRowEvictsOnCard(t *testing.T) {
	for preempt, want := range map[string]struct{ quota, path int64 }{
		policy.MayStopSearch: {0, 4},
		policy.TryNextFlavor: {2, 4},
	} {
		p := MakePolicy("evict").Card("a", 16311, 8).Card("b", 16311, 8).CardNodeLabels("b", nil).
			Priority("high", 100).DefaultPriority("low", 10).
			Queue(MakeQueue("q").Namespaces("experiments").Preemption("LowerPriority", "Never").FlavorFungibility(policy.MayStopSearch, preempt).
				Flavor(ample(MakeFlavor("a"), 2)).Flavor(ample(MakeFlavor("b"), 2))).
			Service(MakeService("svc").Namespace("experiments").Queue("q").Card("a").Priority("low").Request(2, GiB(1), 1000)).
			Template(MakeTemplate("any").Queue("q").Card("a").AnyCard().Request(1, GiB(1), 1000)).Obj()
		r, err := admission.Explain(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range r.Capacity {
			if row.Priority != "high" {
				continue
			}
			if row.QuotaAdmits != want.quota || row.Preemption == nil || row.Preemption.QuotaAdmits != want.path {
				t.Fatalf("%s: %d admitted, preemption %+v; want %d, then %d by evicting svc", preempt, row.QuotaAdmits, row.Preemption, want.quota, want.path)
			}
			if ev := row.Preemption.Evicts; len(ev) != 1 || ev[0].Service != "svc" || ev[0].Card != "a" {
				t.Errorf("%s: evicts %+v, want svc on a", preempt, ev)
			}
			if c := row.Preemption.Cards; len(c) != 2 || c[0].Admitted != 2 || c[1].Admitted != 2 {
				t.Errorf("%s: preemption path's cards %+v, want a 2, b 2", preempt, c)
			}
		}
	}
}

// TestFlavorDeclaredPhysicalPerCard: an anyCard template's jobs count on
// the card they land on, not on every card. q holds 4 shares of a and 4
// of b; an always-on service takes 1 share of b and declares 2,000 MiB
// there. The jobs (1 share, 1,000 MiB each) land 4 on a and 3 on b: card
// a's most is 4,000 MiB (4 jobs, no service), card b's 5,000 MiB (the
// service and 3 jobs); counting every job on every card would say 9,000
// on a.
func TestFlavorDeclaredPhysicalPerCard(t *testing.T) {
	p := MakePolicy("per-card").Card("a", 16311, 8).Card("b", 16311, 8).CardNodeLabels("b", nil).
		DefaultPriority("low", 10).
		Queue(MakeQueue("q").Namespaces("experiments").
			Flavor(ample(MakeFlavor("a"), 4)).Flavor(ample(MakeFlavor("b"), 4))).
		Service(MakeService("svc").Namespace("experiments").Queue("q").Card("b").Priority("low").Request(1, GiB(1), 2000)).
		Template(MakeTemplate("any").Queue("q").Card("a").AnyCard().Request(1, GiB(1), 1000)).Obj()
	r, err := admission.Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		policy.PathString("cards", "a", "memoryMiB"): "the most is 4,000 MiB (the services and 4 any jobs on a, ",
		policy.PathString("cards", "b", "memoryMiB"): "the most is 5,000 MiB (the services and 3 any jobs on b, ",
	}
	for _, f := range r.Findings {
		if f.Rule != admission.RuleDeclaredPhysical.ID {
			continue
		}
		w, ok := want[f.Path]
		if !ok {
			t.Errorf("declared-physical on %s: %s", f.Path, f.Message)
			continue
		}
		if !strings.Contains(f.Message, w) {
			t.Errorf("declared-physical on %s: %s; want %q", f.Path, f.Message, w)
		}
		delete(want, f.Path)
	}
	for path := range want {
		t.Errorf("no declared-physical finding on %s", path)
	}
}

// TestFlavorLockFromQuotaAnyCard: two anyCard templates that name
// different cards but may land on the same ones (a, then b) size a lock
// alike: no "name the template" error, and the size counts both cards
// (2 on a, 3 on b).
func TestFlavorLockFromQuotaAnyCard(t *testing.T) {
	w := MakePolicy("lock-any").Card("a", 16311, 8).Card("b", 16311, 8).CardNodeLabels("b", nil).
		DefaultPriority("low", 10).
		Queue(MakeQueue("q").Namespaces("experiments").Flavor(ample(MakeFlavor("a"), 2)).Flavor(ample(MakeFlavor("b"), 3))).
		Lock("main", 0).
		Template(MakeTemplate("any").Queue("q").Card("a").AnyCard().Locks("main").Request(1, GiB(1), 1000)).
		Template(MakeTemplate("any-b").Queue("q").Card("b").AnyCard().Locks("main").Request(1, GiB(1), 1000))
	p := w.Obj()
	l := p.Locks["main"]
	l.FromQueue = &policy.QueueAdmits{Queue: "q", State: map[string]string{}}
	p.Locks["main"] = l
	_, sizes, err := admission.SizeLocks(p)
	if err != nil {
		t.Fatalf("SizeLocks: %v", err)
	}
	if len(sizes) != 1 || sizes[0].Size != 5 {
		t.Fatalf("sizes %+v, want main = 5", sizes)
	}
	// Pinned to a and anyCard: different cards, so the template must be named.
	tp := p.Templates["any-b"]
	tp.AnyCard, tp.Card = false, "a"
	p.Templates["any-b"] = tp
	_, _, err = admission.SizeLocks(p)
	if err == nil || !strings.Contains(err.Error(), "templates any (cards a, b) and any-b (cards a) take it through queue q on different cards") {
		t.Errorf("pinned and anyCard: %v", err)
	}
}

// TestFlavorBorrowingPerCard: TestFlavorWhenCanBorrow's policy. Both
// settings land 3 jobs on a and 2 on b, 2 of a's borrowing; what
// whenCanBorrow changes is which jobs borrow: from the 2nd with
// MayStopSearch (a is tried first while it can borrow there), from the 4th
// with TryNextFlavor (b's nominalQuota first). The row and its text say so.
func TestFlavorBorrowingPerCard(t *testing.T) {
	for borrow, from := range map[string]int64{policy.MayStopSearch: 2, policy.TryNextFlavor: 4} {
		p := twoCardPolicy(MakeQueue("q").Cohort("co").FlavorFungibility(borrow, policy.TryNextFlavor).
			Flavor(ample(MakeFlavor("a"), 1)).Flavor(ample(MakeFlavor("b"), 2)),
			MakeQueue("l").Cohort("co").Namespaces("lender").Flavor(ample(MakeFlavor("a"), 2)))
		r, err := admission.Explain(p)
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		for _, row := range r.Capacity {
			if row.Template != "any" {
				continue
			}
			rows++
			want := []admission.CardJobs{{Card: "a", Admitted: 3, Borrowing: 2, BorrowingFrom: from}, {Card: "b", Admitted: 2}}
			if len(row.Cards) != 2 {
				t.Fatalf("%s: row at %s: cards %+v", borrow, row.Priority, row.Cards)
			}
			for i, c := range row.Cards {
				w := want[i]
				if c.Card != w.Card || c.Admitted != w.Admitted || c.Borrowing != w.Borrowing || c.BorrowingFrom != w.BorrowingFrom {
					t.Errorf("%s: row at %s: card %+v, want %+v", borrow, row.Priority, c, want[i])
				}
			}
		}
		if rows == 0 {
			t.Fatalf("%s: no rows for any", borrow)
		}
		var b strings.Builder
		if err := r.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if w := fmt.Sprintf("5 on a 3 (2 borrowing, from job %d), b 2", from); !strings.Contains(b.String(), w) {
			t.Errorf("%s: text lacks %q:\n%s", borrow, w, b.String())
		}
	}
}
