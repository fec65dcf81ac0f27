package crosscheck_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	. "github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// Flavor assignment on the real Kueue: a ClusterQueue with two cards, a
// (the lab node's labels) and b (no nodeLabels), in that order, and jobs
// of a template that leaves the card to Kueue (anyCard: no nodeSelector on
// the pod) or is pinned to a (a's nodeLabels as its nodeSelector, as
// render writes it). Only shares bind (host and GPU memory are ample).

// flavorPolicy: queue q (experiments) with a and b, the fungibility given,
// templates "any" (anyCard) and "pin-a"; lend adds a queue l in q's cohort
// that lends a's shares.
func flavorPolicy(name string, q *QueueWrapper, lend *QueueWrapper) *policy.Policy {
	w := labCard(MakePolicy(name), "a", 16311, 8).Card("b", 16311, 8).CardNodeLabels("b", nil).
		Priority("high", 100).DefaultPriority("low", 10).
		Queue(q.Namespaces("experiments")).
		Template(MakeTemplate("any").Queue("q").Card("a").AnyCard().Request(1, GiB(1), 1000)).
		Template(MakeTemplate("pin-a").Queue("q").Card("a").Request(1, GiB(1), 1000))
	if lend != nil {
		w = w.Queue(lend.Namespaces("lender"))
	}
	return w.Obj()
}

func ampleFlavor(card string, shares int64) *FlavorWrapper {
	return MakeFlavor(card).Shares(shares).HostMemory(GiB(64)).GPUMemory(100000)
}

// modelJob is a template's job in the model.
func modelJob(s *admission.Snapshot, p *policy.Policy, tmpl, prio string) *admission.Workload {
	t, pr := p.Templates[tmpl], p.Priorities[prio]
	return s.NewWorkload(admission.Workload{Name: tmpl + " job", Template: tmpl, Queue: t.Queue, Card: t.Card,
		Priority: pr.Name, Value: pr.Value, Request: t.Request})
}

// submit creates one job of a template as render ships its pod: the
// template's nodeSelector (policy.PodNodeSelector), none for anyCard.
func (x *checker) submit(ctx context.Context, t *testing.T, tmpl, prio, name string) {
	t.Helper()
	tp := x.p.Templates[tmpl]
	card := "" // no nodeSelector: x.p.Cards[""] has no nodeLabels
	if x.p.PodNodeSelector(tp) != nil {
		card = tp.Card
	}
	x.job(ctx, t, tp.Namespace, name, x.p.Queues[tp.Queue].LocalQueue, prio, card, tp.Request)
}

// flavorsOf maps each cross-check Job with an admitted Workload to the
// flavor Kueue assigned its shares (status.admission.podSetAssignments).
func (x *checker) flavorsOf(ctx context.Context, t *testing.T) map[string]string {
	out := map[string]string{}
	for _, ns := range x.namespaces {
		list, err := x.c.Dynamic().Resource(contract.GVRWorkload).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing workloads in %s: %v", ns, err)
		}
		for _, wl := range list.Items {
			psas, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
			if len(psas) == 0 {
				continue
			}
			psa, _ := psas[0].(map[string]any)
			fl, _, _ := unstructured.NestedString(psa, "flavors", policy.ResourceShares)
			for _, ref := range wl.GetOwnerReferences() {
				if ref.Kind == "Job" {
					out[ref.Name] = fl
				}
			}
		}
	}
	return out
}

// admittedOn waits until the job's Workload is admitted and returns its
// flavor; "" when it is not admitted within 3 s of quiet after want says
// it waits.
func (x *checker) admittedOn(ctx context.Context, t *testing.T, job string, expectAdmit bool) string {
	t.Helper()
	if !expectAdmit {
		time.Sleep(3 * time.Second)
		return x.flavorsOf(ctx, t)[job]
	}
	var fl string
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		fl = x.flavorsOf(ctx, t)[job]
		return fl != "", nil
	})
	return fl
}

// TestCrossCheckFlavorWhenCanBorrow: q holds 1 share of a and 2 of b and
// may borrow 2 more of a from l. Jobs of "any" submitted one at a time:
// the first card fills, then the next; with whenCanBorrow MayStopSearch a
// job stays on a while it can borrow there (a a a b b), with TryNextFlavor
// it takes b, where it fits without borrowing, first (a b b a a); the
// sixth waits. Each job's flavor must be the model's; and explain's row
// (the jobs submitted together) must give each card as many jobs as Kueue
// does.
func TestCrossCheckFlavorWhenCanBorrow(t *testing.T) {
	for _, borrow := range []string{policy.MayStopSearch, policy.TryNextFlavor} {
		t.Run(borrow, func(t *testing.T) {
			p := flavorPolicy("flavors-borrow", MakeQueue("q").Cohort("co").FlavorFungibility(borrow, policy.TryNextFlavor).
				Flavor(ampleFlavor("a", 1)).Flavor(ampleFlavor("b", 2)),
				MakeQueue("l").Cohort("co").Flavor(ampleFlavor("a", 2)))
			s := admission.NewSnapshot(p)
			var want []string
			for len(want) < 6 {
				w := modelJob(s, p, "any", "low")
				if s.Decide(w).Outcome != admission.Admit {
					want = append(want, "")
					break
				}
				s.Add(w)
				want = append(want, w.Card)
			}
			c := labCluster(t)
			x := newChecker(t, c, p)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			x.reset(ctx, t)
			var got []string
			for i, wfl := range want {
				name := fmt.Sprintf("job-any-%d", i)
				x.submit(ctx, t, "any", "low", name)
				got = append(got, x.admittedOn(ctx, t, name, wfl != ""))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Kueue assigned the jobs %q one by one, the model %q", got, want)
			}
			// explain's row: the jobs submitted together.
			r, err := admission.Explain(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range r.Capacity {
				if row.Template != "any" || row.Priority != "low" {
					continue
				}
				x.reset(ctx, t)
				for i := 0; i < int(row.QuotaAdmits)+1; i++ {
					x.submit(ctx, t, "any", "low", fmt.Sprintf("job-any-%d", i))
				}
				x.waitAdmitted(ctx, t, "job-", row.QuotaAdmits)
				byCard := map[string]int64{}
				for _, fl := range x.flavorsOf(ctx, t) {
					byCard[fl]++
				}
				if len(row.Cards) != 2 || row.Cards[0].Admitted != byCard["a"] || row.Cards[1].Admitted != byCard["b"] {
					t.Errorf("explain's row: %d admitted, cards %+v; Kueue %v", row.QuotaAdmits, row.Cards, byCard)
				}
			}
			t.Logf("Kueue and the model agree: %q", got)
		})
	}
}

// TestCrossCheckFlavorWhenCanPreempt: q (withinClusterQueue LowerPriority)
// holds 2 shares of a and 2 of b; two low pin-a jobs fill a. A high "any"
// job then fits b: with whenCanPreempt TryNextFlavor Kueue admits it on b
// and evicts nothing; with MayStopSearch it stops at a, where it can
// preempt, evicts one pin-a job (InClusterQueue) and is admitted on a.
func TestCrossCheckFlavorWhenCanPreempt(t *testing.T) {
	for _, preempt := range []string{policy.TryNextFlavor, policy.MayStopSearch} {
		t.Run(preempt, func(t *testing.T) {
			p := flavorPolicy("flavors-preempt", MakeQueue("q").Preemption("LowerPriority", "Never").
				FlavorFungibility(policy.MayStopSearch, preempt).
				Flavor(ampleFlavor("a", 2)).Flavor(ampleFlavor("b", 2)), nil)
			s := admission.NewSnapshot(p)
			for i := 0; i < 2; i++ {
				w := modelJob(s, p, "pin-a", "low")
				if d := s.Decide(w); d.Outcome != admission.Admit || w.Card != "a" {
					t.Fatalf("model: pin-a job %d: %s on %s", i, d.Outcome, w.Card)
				}
				s.Add(w)
			}
			hi := modelJob(s, p, "any", "high")
			d := s.Decide(hi)
			wantEvicted := map[string]string{}
			if d.Outcome == admission.Preempt {
				for _, tg := range d.Targets {
					wantEvicted[tg.Workload.Template] = tg.Reason
					s.Remove(tg.Workload)
				}
				d = s.Decide(hi)
			}
			if d.Outcome != admission.Admit {
				t.Fatalf("model: the high job: %s", d.Outcome)
			}
			t.Logf("model: the high job lands on %s, evicting %v", hi.Card, wantEvicted)

			c := labCluster(t)
			x := newChecker(t, c, p)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			x.reset(ctx, t)
			for i := 0; i < 2; i++ {
				name := fmt.Sprintf("job-pin-a-%d", i)
				x.submit(ctx, t, "pin-a", "low", name)
				if fl := x.admittedOn(ctx, t, name, true); fl != "a" {
					t.Fatalf("Kueue admitted %s on %q, want a", name, fl)
				}
			}
			x.submit(ctx, t, "any", "high", "job-any-high")
			if fl := x.admittedOn(ctx, t, "job-any-high", true); fl != hi.Card {
				t.Errorf("Kueue admitted the high job on %q, the model on %s", fl, hi.Card)
			}
			evicted := map[string]string{}
			for n, w := range x.workloads(ctx, t) {
				if w.preempted != "" {
					evicted[n] = w.preempted
				}
			}
			if len(evicted) != len(wantEvicted) {
				t.Errorf("Kueue evicted %v, the model %v", evicted, wantEvicted)
			}
			for n, reason := range evicted {
				if want, ok := wantEvicted["pin-a"]; !ok || reason != want {
					t.Errorf("Kueue evicted %s (%s), the model %v", n, reason, wantEvicted)
				}
			}
		})
	}
}

// TestCrossCheckFlavorRowEvicts checks explain's rows for a template on
// two cards against Kueue: an always-on low service holds card a, b is
// free, and high "any" jobs are submitted together. With whenCanPreempt
// MayStopSearch the first job stops at a and evicts the service; with
// TryNextFlavor two jobs land on b first. The jobs Kueue admits, where it
// puts them and whom it evicts must be the row's preemption path.
func TestCrossCheckFlavorRowEvicts(t *testing.T) {
	for _, preempt := range []string{policy.MayStopSearch, policy.TryNextFlavor} {
		t.Run(preempt, func(t *testing.T) {
			p := labCard(MakePolicy("flavors-evict"), "a", 16311, 8).Card("b", 16311, 8).CardNodeLabels("b", nil).
				Priority("high", 100).DefaultPriority("low", 10).
				Queue(MakeQueue("q").Namespaces("experiments").Preemption("LowerPriority", "Never").
					FlavorFungibility(policy.MayStopSearch, preempt).
					Flavor(ampleFlavor("a", 2)).Flavor(ampleFlavor("b", 2))).
				Service(MakeService("svc").Namespace("experiments").Queue("q").Card("a").Priority("low").Request(2, GiB(1), 1000)).
				Template(MakeTemplate("any").Queue("q").Card("a").AnyCard().Request(1, GiB(1), 1000)).Obj()
			r, err := admission.Explain(p)
			if err != nil {
				t.Fatal(err)
			}
			var row *admission.Capacity
			for i := range r.Capacity {
				if r.Capacity[i].Priority == "high" {
					row = &r.Capacity[i]
				}
			}
			if row == nil || row.Preemption == nil {
				t.Fatalf("the model has no preemption path at high: %+v", row)
			}
			pp := row.Preemption
			t.Logf("model: %d admitted without evicting, %d after evicting %v, cards %+v", row.QuotaAdmits, pp.QuotaAdmits, pp.Evicts, pp.Cards)

			c := labCluster(t)
			x := newChecker(t, c, p)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			x.reset(ctx, t)
			x.servicesUp(ctx, t, nil)
			for i := 0; i < int(pp.QuotaAdmits)+2; i++ {
				x.submit(ctx, t, "any", "high", fmt.Sprintf("job-any-%d", i))
			}
			x.waitAdmitted(ctx, t, "job-", pp.QuotaAdmits)
			byCard := map[string]int64{}
			for n, fl := range x.flavorsOf(ctx, t) {
				if n != "svc-svc" {
					byCard[fl]++
				}
			}
			for _, cj := range pp.Cards {
				if byCard[cj.Card] != cj.Admitted {
					t.Errorf("Kueue put %v jobs on the cards, the model %+v", byCard, pp.Cards)
					break
				}
			}
			evicted := map[string]string{}
			for n, w := range x.workloads(ctx, t) {
				if w.preempted != "" {
					evicted[n] = w.preempted
				}
			}
			if len(evicted) != len(pp.Evicts) || evicted["svc-"+pp.Evicts[0].Service] != pp.Evicts[0].Reason {
				t.Errorf("Kueue evicted %v, the model %+v", evicted, pp.Evicts)
			}
		})
	}
}
