package admission

import (
	"fmt"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// Flavor assignment. A ClusterQueue with several cards has one resource
// group whose flavors are the cards in the policy's order (render), and a
// job whose pod does not pin a card (a template with anyCard, or whose card
// has no nodeLabels: policy.TemplateCards) may be assigned any of them. Kueue
// v0.17 picks one per scheduling attempt, in
// pkg/scheduler/flavorassigner/flavorassigner.go:
//
//   - findFlavorForPodSets walks the group's flavors in order, skipping
//     those whose nodeLabels the pod's nodeSelector rules out
//     (checkFlavorForPodSets, flavorSelector: policy.CardChoice);
//   - for each, every requested resource gets a mode from fitsResourceQuota:
//     noFit (above PotentialAvailable, or short and preemption not even
//     tried: above nominal, no reclaim in the cohort tree
//     (mayReclaimInHierarchy) and no borrowWithinCohort), fit (within
//     Available), else the preemption oracle's answer for that resource
//     alone (preemption_oracle.go, SimulatePreemption: no candidates,
//     "preempt" when a target is in the same ClusterQueue, "reclaim"
//     otherwise), each with a borrowing level (borrowLevel). The
//     flavor's mode is the worst of its resources (isPreferred);
//   - shouldTryNextFlavor stops the walk at a flavor in fit or preempt mode
//     unless flavorFungibility says TryNextFlavor for what it needs:
//     whenCanPreempt for a preempt/reclaim mode, whenCanBorrow for a
//     borrowing level above 0. noFit and "no candidates" always go on;
//   - when the walk ends without stopping, the best flavor seen wins
//     (isPreferred with the default preference BorrowingOverPreemption:
//     the better preemption mode, then the lower borrowing level; the
//     first on a tie).
//
// A workload Kueue does not admit is retried from the next flavor
// (AssignmentClusterQueueState.NextFlavorToTryForPodSetResource) unless
// preemption was issued or the ClusterQueue changed; the model starts every
// attempt from the first flavor, as Kueue does after an eviction or an
// admission in the queue (scheduler.go: LastAssignment = nil).

// granular is flavorassigner's granularMode: a preemption mode and a
// borrowing level.
type granular struct {
	mode   pmode
	borrow int
}

// pmode is flavorassigner's preemptionMode, worst first.
type pmode int

const (
	pmNoFit pmode = iota
	pmNoCandidates
	pmPreempt
	pmReclaim
	pmFit
)

// preferred is flavorassigner.isPreferred with the default preference
// (BorrowingOverPreemption): a is strictly better than b.
func preferred(a, b granular) bool {
	if a.mode == pmNoFit {
		return false
	}
	if b.mode == pmNoFit {
		return true
	}
	if a.mode != b.mode {
		return a.mode > b.mode
	}
	return a.borrow < b.borrow
}

// tryNext is flavorassigner.shouldTryNextFlavor.
func tryNext(g granular, f policy.FlavorFungibility) bool {
	if g.mode == pmNoFit || g.mode == pmNoCandidates {
		return true
	}
	if (g.mode == pmPreempt || g.mode == pmReclaim) && f.WhenCanPreempt == policy.TryNextFlavor {
		return true
	}
	return g.borrow > 0 && f.WhenCanBorrow == policy.TryNextFlavor
}

// borrowLevel is classical.FindHeightOfLowestSubtreeThatFits's height
// (lowestSubtreeThatFits, cohorts.go): 0 when usage + val stays within the
// queue's nominal quota (or the queue has no cohort), else the height of
// the lowest subtree of its cohort tree that holds it (1 in a flat
// cohort).
func (cq *clusterQueue) borrowLevel(fr FlavorResource, val int64) int {
	h, _ := cq.lowestSubtreeThatFits(fr, val)
	return h
}

// cardsOf returns the cards Kueue may assign w, in the order it tries
// them: w.Cards when set, else its template's (policy.TemplateCards),
// else none (w is pinned to w.Card).
func (s *Snapshot) cardsOf(w *Workload) []string {
	if w.Cards != nil || w.Template == "" || w.Service != "" {
		return w.Cards
	}
	if s.tcards == nil {
		s.tcards = map[string][]string{}
	}
	cards, ok := s.tcards[w.Template]
	if !ok {
		if t, found := s.p.Templates[w.Template]; found {
			cards = s.p.TemplateCards(t)
		}
		s.tcards[w.Template] = cards
	}
	return cards
}

// assignCard sets w.Card to the card Kueue's flavor assigner gives w in the
// snapshot's state (findFlavorForPodSets), when w may land on more than
// one. When no card is offered any mode but noFit, w.Card is the first card
// where w could ever fit (Decide then says Wait), or the first card (NoFit).
func (s *Snapshot) assignCard(w *Workload) {
	cards := s.cardsOf(w)
	if len(cards) < 2 {
		return // pinned: w.Card (vet's queue-lacks-card: its queue has it)
	}
	cq := s.queue(w.Queue)
	fung := s.p.Queues[w.Queue].Fungibility()
	best, bestMode := "", granular{mode: pmNoFit, borrow: 1 << 30}
	for _, card := range cards {
		g := s.flavorMode(w, cq, card)
		if !tryNext(g, fung) {
			w.Card = card
			return
		}
		if preferred(g, bestMode) {
			best, bestMode = card, g
		}
	}
	if best != "" {
		w.Card = best
		return
	}
	w.Card = cards[0]
	for _, card := range cards {
		if s.everFits(w, cq, card) {
			w.Card = card
			return
		}
	}
}

// everFits reports whether w's every request is at most PotentialAvailable
// on card.
func (s *Snapshot) everFits(w *Workload, cq *clusterQueue, card string) bool {
	for _, k := range policy.Kinds {
		v := w.Request.Get(k)
		if v <= 0 {
			continue
		}
		fr := FlavorResource{card, k}
		if !cq.hasQuota(fr) || v > cq.potentialAvailable(fr) {
			return false
		}
	}
	return true
}

// flavorMode is the representative granular mode of w on card: the worst
// of fitsResourceQuota's modes over its requests.
func (s *Snapshot) flavorMode(w *Workload, cq *clusterQueue, card string) granular {
	rep := granular{mode: pmFit}
	bwc := borrowWithinCohortEnabled(cq.pre)
	for _, k := range policy.Kinds {
		val := w.Request.Get(k)
		if val <= 0 {
			continue
		}
		fr := FlavorResource{card, k}
		var g granular
		switch {
		case !cq.hasQuota(fr) || val > cq.potentialAvailable(fr):
			g = granular{mode: pmNoFit}
		case val <= max(0, cq.available(fr)):
			g = granular{mode: pmFit, borrow: cq.borrowLevel(fr, val)}
		case val <= cq.quota(fr).Nominal || cq.mayReclaim(fr, val) || bwc:
			g = s.oracle(w, cq, fr, val)
		default:
			g = granular{mode: pmNoFit, borrow: cq.borrowLevel(fr, val)}
		}
		if preferred(rep, g) {
			rep = g
		}
		if rep.mode == pmNoFit {
			return rep
		}
	}
	return rep
}

// oracle is preemption_oracle.go's SimulatePreemption: the classical
// candidate search for one FlavorResource and that request alone. No
// targets: noPreemptionCandidates at the current borrowing level; a target
// in w's own queue: preempt; else reclaim; with the borrowing level once
// the targets are gone.
func (s *Snapshot) oracle(w *Workload, cq *clusterQueue, fr FlavorResource, val int64) granular {
	probe := *w
	probe.Card = fr.Card
	probe.Cards = []string{fr.Card}
	probe.Request = policy.Request{}
	switch fr.Kind {
	case policy.Shares:
		probe.Request.Shares = val
	case policy.HostMemory:
		probe.Request.HostMemoryMiB = val
	default:
		probe.Request.GPUMemoryMiB = val
	}
	targets := s.classicalTargets(&probe, cq, frSet{fr})
	if len(targets) == 0 {
		return granular{mode: pmNoCandidates, borrow: cq.borrowLevel(fr, val)}
	}
	mode := pmReclaim
	for _, t := range targets {
		s.Remove(t.Workload)
		if t.Workload.Queue == cq.name {
			mode = pmPreempt
		}
	}
	borrow := cq.borrowLevel(fr, val)
	for _, t := range targets {
		s.restore(t.Workload)
	}
	return granular{mode: mode, borrow: borrow}
}

// availableBy is Available per card and kind of the queue.
func (s *Snapshot) availableBy(queue string, cards []string) map[string]map[policy.Kind]int64 {
	out := make(map[string]map[policy.Kind]int64, len(cards))
	for _, card := range cards {
		m := make(map[policy.Kind]int64, len(policy.Kinds))
		for _, k := range policy.Kinds {
			m[k] = s.Available(queue, FlavorResource{card, k})
		}
		out[card] = m
	}
	return out
}

// availableSum is Available per kind on card, or, given per-card figures
// (availableBy), their sum over the cards.
func (s *Snapshot) availableSum(queue, card string, by map[string]map[policy.Kind]int64) map[policy.Kind]int64 {
	out := make(map[policy.Kind]int64, len(policy.Kinds))
	for _, k := range policy.Kinds {
		if by == nil {
			out[k] = s.Available(queue, FlavorResource{card, k})
			continue
		}
		for _, m := range by {
			out[k] += m[k]
		}
	}
	return out
}

// cardJobs says, for a template that may land on several cards, where the
// first n admitted jobs landed and what is left of each card; nil for a
// pinned one.
func (e *explainer) cardJobs(v variant, sim *quotaSim, avail map[string]map[policy.Kind]int64, n int64) []CardJobs {
	if sim.cards == nil {
		return nil
	}
	out := make([]CardJobs, 0, len(sim.cards))
	for _, card := range sim.cards {
		cj := CardJobs{Card: card, Margin: map[string]string{}}
		for i, l := range sim.landed[:min(n, int64(len(sim.landed)))] {
			if l != card {
				continue
			}
			cj.Admitted++
			if sim.borrowed[i] {
				cj.Borrowing++
				if cj.BorrowingFrom == 0 {
					cj.BorrowingFrom = int64(i) + 1
				}
			}
		}
		for _, k := range policy.Kinds {
			if req := v.t.Request.Get(k); req > 0 {
				cj.Margin[e.p.Resource(k)] = e.quantity(k, avail[card][k]-cj.Admitted*req)
			}
		}
		out = append(out, cj)
	}
	return out
}

// cardJobsAfter is cardJobs for a preemption path: the first n of every
// admitted job, with what is left of each card once the evictions are done
// and they run (the jobs beyond n given back).
func (e *explainer) cardJobsAfter(v variant, sim *quotaSim, n int64) []CardJobs {
	if sim.cards == nil {
		return nil
	}
	// Available once the path is done, with only its first n jobs: give
	// back what the jobs beyond n hold.
	avail := make(map[string]map[policy.Kind]int64, len(sim.cards))
	for _, card := range sim.cards {
		m := make(map[policy.Kind]int64, len(policy.Kinds))
		for _, k := range policy.Kinds {
			m[k] = sim.preemptBy[card][k]
		}
		avail[card] = m
	}
	for _, l := range sim.landed[min(n, int64(len(sim.landed))):] {
		for _, k := range policy.Kinds {
			avail[l][k] += v.t.Request.Get(k)
		}
	}
	// cardJobs subtracts the first n jobs again from what includes them.
	for _, l := range sim.landed[:min(n, int64(len(sim.landed)))] {
		for _, k := range policy.Kinds {
			avail[l][k] += v.t.Request.Get(k)
		}
	}
	return e.cardJobs(v, sim, avail, n)
}

// cardGroups returns, for a (queue, card), the card that stands for every
// card of the queue's cohort (its queue without one) that a template's jobs
// may land on together with it: components (components.go) key on it, so
// that the services of every card an unpinned template may take count in
// its rows. A card no such template links stands for itself.
func (e *explainer) cardGroups() func(queue, card string) string {
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		p, ok := parent[x]
		if !ok || p == x {
			return x
		}
		r := find(p)
		parent[x] = r
		return r
	}
	key := func(queue, card string) string { return e.groupKey(queue) + "\x00" + card }
	for _, v := range e.variants {
		cards := e.p.TemplateCards(v.t)
		for _, c := range cards[min(1, len(cards)):] {
			a, b := find(key(v.t.Queue, cards[0])), find(key(v.t.Queue, c))
			if a != b {
				if b < a {
					a, b = b, a
				}
				parent[b] = a
			}
		}
	}
	return func(queue, card string) string {
		r := find(key(queue, card))
		_, c, _ := strings.Cut(r, "\x00")
		return c
	}
}

// cardsWords is " on l4 2, a100 4" for an answer whose jobs land on
// several cards, "" otherwise; a card where some of them borrow says how
// many and from which job on: " on l4 3 (2 borrowing, from job 2), a100 2".
func cardsWords(cards []CardJobs) string {
	if cards == nil {
		return ""
	}
	parts := make([]string, 0, len(cards))
	for _, c := range cards {
		part := fmt.Sprintf("%s %d", c.Card, c.Admitted)
		if c.Borrowing > 0 {
			part += fmt.Sprintf(" (%d borrowing, from job %d)", c.Borrowing, c.BorrowingFrom)
		}
		parts = append(parts, part)
	}
	return " on " + strings.Join(parts, ", ")
}

// outlookCardWords is "card l4", or "cards l4, a100 (Kueue's choice, in
// that order)" for a template that may land on several.
func outlookCardWords(o Outlook) string {
	if o.Best.Cards == nil {
		return "card " + o.Card
	}
	names := make([]string, 0, len(o.Best.Cards))
	for _, c := range o.Best.Cards {
		names = append(names, c.Card)
	}
	return "cards " + strings.Join(names, ", ") + ": Kueue's choice, in that order"
}

// cardsOfVariant lists the cards a variant's jobs may land on, in Kueue's
// order: its own card alone when it is pinned.
func (e *explainer) cardsOfVariant(v variant) []string {
	if cards := e.empty.cardsOf(&Workload{Template: v.base}); len(cards) > 1 {
		return cards
	}
	return []string{v.t.Card}
}
