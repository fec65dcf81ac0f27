package admission

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// A ClusterQueue's queueingStrategy decides what Kueue v0.17 does with a
// pending workload it cannot admit (pkg/cache/queue/cluster_queue.go,
// ClusterQueue.RequeueIfNotPresent). The scheduler takes one head per
// ClusterQueue each cycle (Manager.heads: ClusterQueue.Pop), the highest
// priority first, then the oldest (baseCompareFunc).
//
//   - BestEffortFIFO: a head that does not fit goes to the inadmissible
//     workloads (requeueIfNotPresent with immediate false), so the next
//     one becomes the head and is admitted if it fits.
//   - StrictFIFO: the head is pushed straight back (immediate is true for
//     every reason but a namespace mismatch), so it is the head again next
//     cycle and nothing behind it in the queue is tried while it cannot be
//     admitted — even a workload that would fit.
//
// A StrictFIFO head can also hold off other queues of its cohort. When it
// needs preemption but finds no candidate (flavorassigner: mode Preempt,
// noPreemptionCandidates), scheduler.schedule reserves its quota for the
// cycle unless its reclaimWithinCohort is Any (preemption.CanAlwaysReclaim
// false → cq.AddUsage(resourcesToReserve)): up to its request of its own
// unused nominal quota (quotaResourcesToReserve). Heads that the cycle
// takes after it (scheduler.makeClassicalIterator: not borrowing before
// borrowing, then higher priority, then older) and that no longer fit are
// skipped ("Workload no longer fits after processing another workload").
// With StrictFIFO that happens every cycle (kubernetes-sigs/kueue#4809);
// with BestEffortFIFO the head is set aside after one.

// RuleStrictFIFOBlocked: a StrictFIFO head that cannot be admitted holds
// off a workload Kueue would otherwise admit. Warning: it waits until the
// head is admitted or deleted; error when the head can never be admitted
// (it asks more than its queue could ever hold), so the wait never ends.
var RuleStrictFIFOBlocked = explainRule("strict-fifo-blocked", finding.Warning, []finding.Severity{finding.Error},
	"in a StrictFIFO queue a job Kueue cannot admit stays at the head and every job behind it waits, even one that fits; the quota it reserves can hold off borrowers in the cohort")

// The ways a head holds a workload off (Block.How).
const (
	// HowBehindHead: the workload is in the head's queue, behind it.
	HowBehindHead = "behind-head"
	// HowReservedQuota: the workload is in another queue of the cohort and
	// no longer fits once the head's reservation is counted.
	HowReservedQuota = "reserved-quota"
)

// Queueing is what one ClusterQueue's queueingStrategy does to the
// workloads queued behind a head Kueue cannot admit.
type Queueing struct {
	Queue string `json:"queue"`
	// Strategy is "BestEffortFIFO" or "StrictFIFO".
	Strategy string `json:"strategy"`
	// Blocks lists, for a StrictFIFO queue, each head that holds off a
	// workload Kueue would otherwise admit; empty for BestEffortFIFO.
	Blocks []Block `json:"blocks"`
	// States is the number of service states evaluated (those of the
	// on-demand services in the queue's cohort); Exact is false when there
	// were too many to evaluate every one (every service down, all up,
	// each alone).
	States int  `json:"states"`
	Exact  bool `json:"exact"`
}

// Block is one head (a template's job at a priority) and, per service
// state, the workloads it holds off in one way.
type Block struct {
	Head FIFOHead `json:"head"`
	// How is HowBehindHead or HowReservedQuota.
	How string `json:"how"`
	// When lists the service states in which it happens.
	When []BlockState `json:"when"`
}

// FIFOHead is a workload at the head of a StrictFIFO queue that Kueue
// cannot admit: a template's job, or an on-demand service coming up.
type FIFOHead struct {
	Template      string `json:"template,omitempty"`
	Service       string `json:"service,omitempty"`
	Queue         string `json:"queue"`
	Card          string `json:"card"`
	Priority      string `json:"priority"`
	PriorityValue int32  `json:"priorityValue"`
	// Outcome is "wait" (it fits once quota frees up) or "no-fit" (it asks
	// more than its queue could ever hold: the block never ends).
	Outcome string `json:"outcome"`
}

// name is "a gpu-large job" or "service qwen2-5-7b".
func (h FIFOHead) name() string {
	if h.Service != "" {
		return "service " + h.Service
	}
	return "a " + h.Template + " job"
}

// label is "gpu-large" or "service qwen2-5-7b".
func (h FIFOHead) label() string {
	if h.Service != "" {
		return "service " + h.Service
	}
	return h.Template
}

// Waiter is a workload a head holds off: a template's job or a service
// coming up.
type Waiter struct {
	Template      string `json:"template,omitempty"`
	Service       string `json:"service,omitempty"`
	Queue         string `json:"queue"`
	Priority      string `json:"priority"`
	PriorityValue int32  `json:"priorityValue"`
}

// BlockState is one service state of a Block.
type BlockState struct {
	// State maps the cohort's on-demand services to "up" or "down".
	State map[string]string `json:"state"`
	// Ahead is how many jobs like the head Kueue admitted before it.
	Ahead int64 `json:"ahead"`
	// Short lists the resources the head does not fit in.
	Short []string `json:"short"`
	// Reserved is what the head reserves each cycle (HowReservedQuota):
	// resource → quantity.
	Reserved map[string]string `json:"reserved,omitempty"`
	// Waits lists the workloads it holds off that Kueue would otherwise
	// admit at once.
	Waits []Waiter `json:"waits"`
}

// fifoState is one reachable service state of a cohort.
type fifoState struct {
	up    map[string]bool
	state map[string]string
	snap  *Snapshot
}

// cohortStates builds the reachable service states of the queue's cohort
// (its own queue without one): every always-on service of the cohort
// admitted, then the on-demand ones up, each of which must be admitted.
// All combinations up to ExactServices on-demand services; beyond, every
// one down, all up and each alone (exact false).
func (e *explainer) cohortStates(queue string) (states []fifoState, exact bool) {
	keep := map[string]bool{}
	for _, q := range e.cohortOf[queue] {
		keep[q] = true
	}
	var always, onDemand []string
	for _, n := range e.p.ServiceNames() {
		if !keep[e.p.Services[n].Queue] {
			continue
		}
		if e.p.Services[n].Mode == policy.OnDemand {
			onDemand = append(onDemand, n)
		} else {
			always = append(always, n)
		}
	}
	var ups [][]string
	exact = len(onDemand) <= ExactServices
	if exact {
		for m := 0; m < 1<<len(onDemand); m++ {
			var up []string
			for _, j := range maskUp(m, len(onDemand)) {
				up = append(up, onDemand[j])
			}
			ups = append(ups, up)
		}
	} else {
		ups = append(ups, nil, onDemand)
		for _, n := range onDemand {
			ups = append(ups, []string{n})
		}
	}
	for _, up := range ups {
		st := fifoState{up: map[string]bool{}, state: map[string]string{}, snap: newSnapshotOf(e.p, keep)}
		for _, n := range onDemand {
			st.state[n] = policy.ServiceDown
		}
		ok := true
		for _, n := range append(append([]string{}, always...), up...) {
			w := serviceWorkload(st.snap, e.p, n)
			if st.snap.Decide(w).Outcome != Admit {
				ok = false
				break
			}
			st.snap.Add(w)
		}
		if !ok {
			continue // a service up here is not admitted: service-unadmitted
		}
		for _, n := range up {
			st.up[n], st.state[n] = true, policy.ServiceUp
		}
		states = append(states, st)
	}
	return states, exact
}

// queueing analyses every ClusterQueue's queueing strategy and reports the
// StrictFIFO blocks.
func (e *explainer) queueing() []Queueing {
	out := []Queueing{}
	for _, qn := range e.p.QueueNames() {
		q := e.p.Queues[qn]
		qq := Queueing{Queue: qn, Strategy: q.Strategy(), Blocks: []Block{}, Exact: true}
		if q.Strategy() == policy.StrictFIFO {
			e.strictFIFO(&qq)
			e.strictFIFOFinding(&qq)
		}
		out = append(out, qq)
	}
	return out
}

// strictFIFO fills qq.Blocks: in every reachable state, for every template
// of the queue at every priority its namespace may use, the queue filled
// with its jobs until the next one is not admitted (the head); and every
// on-demand service of the queue that is down and cannot come up (the
// head); then who that head holds off.
func (e *explainer) strictFIFO(qq *Queueing) {
	qn := qq.Queue
	states, exact := e.cohortStates(qn)
	qq.States, qq.Exact = len(states), exact
	type key struct{ head, prio, how string }
	byKey := map[key]*Block{}
	var order []key
	note := func(head FIFOHead, how string, bs BlockState) {
		if len(bs.Waits) == 0 {
			return
		}
		k := key{head.Template + "\x00" + head.Service, head.Priority, how}
		if byKey[k] == nil {
			byKey[k] = &Block{Head: head, How: how, When: []BlockState{}}
			order = append(order, k)
		}
		byKey[k].When = append(byKey[k].When, bs)
	}
	// stuck notes what a head h that Decide does not admit (d) holds off.
	stuck := func(st fifoState, h *Workload, d Decision, head FIFOHead, ahead int64, pr policy.Priority) {
		s := st.snap
		bs := BlockState{State: st.state, Ahead: ahead, Short: []string{}}
		for _, fr := range d.Short {
			bs.Short = append(bs.Short, e.p.Resource(fr.Kind))
		}
		inQueue := bs
		inQueue.Waits = e.behindHead(s, st, qn, pr)
		note(head, HowBehindHead, inQueue)
		if d.Outcome == Wait && e.reservesQuota(s, h, d) {
			cross := bs
			cross.Reserved, cross.Waits = e.heldOffByReservation(s, st, h, pr)
			note(head, HowReservedQuota, cross)
		}
	}
	for _, st := range states {
		s := st.snap
		for _, n := range e.servicesBy[qn] {
			sv := e.p.Services[n]
			if sv.Mode != policy.OnDemand || st.up[n] {
				continue
			}
			h := serviceWorkload(s, e.p, n)
			if d := s.Decide(h); d.Outcome == Wait || d.Outcome == NoFit {
				pr := e.p.Priorities[sv.Priority]
				head := FIFOHead{Service: n, Queue: qn, Card: sv.Card, Priority: pr.Name, PriorityValue: pr.Value, Outcome: d.Outcome.String()}
				stuck(st, h, d, head, 0, pr)
			}
		}
		for _, v := range e.variants {
			if v.cacheFree || v.t.Queue != qn {
				continue
			}
			for _, pr := range e.priorities(v.t.Namespace) {
				var added []*Workload
				for len(added) < maxJobs {
					w := e.jobWorkload(s, v, pr)
					if s.Decide(w).Outcome != Admit {
						break
					}
					s.Add(w)
					added = append(added, w)
				}
				h := e.jobWorkload(s, v, pr)
				d := s.Decide(h)
				if d.Outcome == Wait || d.Outcome == NoFit {
					head := FIFOHead{Template: v.base, Queue: qn, Card: h.Card, Priority: pr.Name, PriorityValue: pr.Value, Outcome: d.Outcome.String()}
					stuck(st, h, d, head, int64(len(added)), pr)
				}
				for _, w := range added {
					s.Remove(w)
				}
			}
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := byKey[order[i]], byKey[order[j]]
		switch {
		case a.How != b.How:
			return a.How == HowBehindHead
		case a.Head.Template+a.Head.Service != b.Head.Template+b.Head.Service:
			return a.Head.Template+a.Head.Service < b.Head.Template+b.Head.Service
		}
		return a.Head.PriorityValue < b.Head.PriorityValue
	})
	for _, k := range order {
		qq.Blocks = append(qq.Blocks, *byKey[k])
	}
}

// priorities lists the ladder's priorities a workload in the namespace may
// use (policy.Allowed: the API server rejects the others), top first.
func (e *explainer) priorities(ns string) []policy.Priority {
	// Once per namespace: Allowed reads every queue, template and
	// service, and the StrictFIFO analysis asks for each head and job.
	if out, ok := e.prioritiesOf[ns]; ok {
		return out
	}
	rights := e.p.Allowed(ns)
	var out []policy.Priority
	for _, pr := range e.ladder {
		if rights.MayUsePriority(pr.Name) {
			out = append(out, pr)
		}
	}
	if e.prioritiesOf == nil {
		e.prioritiesOf = map[string][]policy.Priority{}
	}
	e.prioritiesOf[ns] = out
	return out
}

// behindHead lists the workloads of queue qn that Kueue orders after a
// head at pr (lower priority, or equal and submitted later: baseCompareFunc)
// and would admit at once: every template's job at every such priority,
// and every on-demand service of the queue that is down.
func (e *explainer) behindHead(s *Snapshot, st fifoState, qn string, pr policy.Priority) []Waiter {
	var out []Waiter
	for _, v := range e.variants {
		if v.cacheFree || v.t.Queue != qn {
			continue
		}
		for _, pb := range e.priorities(v.t.Namespace) {
			if pb.Value > pr.Value {
				continue
			}
			if s.Decide(e.jobWorkload(s, v, pb)).Outcome == Admit {
				out = append(out, Waiter{Template: v.base, Queue: qn, Priority: pb.Name, PriorityValue: pb.Value})
			}
		}
	}
	for _, n := range e.servicesBy[qn] {
		sv := e.p.Services[n]
		if sv.Mode != policy.OnDemand || st.up[n] {
			continue
		}
		pv := e.p.Priorities[sv.Priority].Value
		if pv > pr.Value {
			continue
		}
		if s.Decide(serviceWorkload(s, e.p, n)).Outcome == Admit {
			out = append(out, Waiter{Service: n, Queue: qn, Priority: sv.Priority, PriorityValue: pv})
		}
	}
	return out
}

// reservesQuota reports whether Kueue's scheduler reserves quota for a head
// that waits (Decide's Wait): only when the flavor assigner put it in
// Preempt mode — every resource it is short of within its queue's nominal
// quota, or borrowWithinCohort set (flavorassigner.fitsResourceQuota),
// and no candidate found (noPreemptionCandidates); a resource over
// nominal without borrowWithinCohort is NoFit, which reserves nothing —
// and only when reclaimWithinCohort is not Any
// (preemption.CanAlwaysReclaim).
func (e *explainer) reservesQuota(s *Snapshot, h *Workload, d Decision) bool {
	q := e.p.Queues[h.Queue]
	if q.Preemption.ReclaimWithinCohort == "Any" {
		return false
	}
	bwc := borrowWithinCohortEnabled(q.Preemption)
	for _, fr := range d.Short {
		if h.Request.Get(fr.Kind) > s.Nominal(h.Queue, fr) && !bwc {
			return false
		}
	}
	return len(d.Short) > 0
}

// borrows is Kueue's Assignment.Borrows for a workload in a flat cohort:
// some request takes its queue above its nominal quota
// (classical.FindHeightOfLowestSubtreeThatFits: ClusterQueueSnapshot.
// BorrowingWith, usage + request > nominal), and the queue has a cohort.
func (e *explainer) borrows(s *Snapshot, w *Workload) bool {
	if e.p.Queues[w.Queue].Cohort == "" {
		return false
	}
	for _, r := range w.requests() {
		if s.Usage(w.Queue, r.fr)+r.v > s.Nominal(w.Queue, r.fr) {
			return true
		}
	}
	return false
}

// reservation is scheduler.quotaResourcesToReserve for a head in Preempt
// mode: per resource it asks, when it would borrow, its request (bounded
// by nominal + borrowingLimit - usage); otherwise what is left of its own
// nominal quota, up to its request.
func (e *explainer) reservation(s *Snapshot, h *Workload) policy.Request {
	var r policy.Request
	borrowing := e.borrows(s, h)
	fq := e.p.Queues[h.Queue].Flavors[h.Card]
	for _, k := range policy.Kinds {
		req := h.Request.Get(k)
		if req <= 0 {
			continue
		}
		fr := FlavorResource{h.Card, k}
		usage, nominal := s.Usage(h.Queue, fr), s.Nominal(h.Queue, fr)
		var v int64
		switch bl := fq.Get(k).BorrowingLimit; {
		case borrowing && bl == nil:
			v = req
		case borrowing:
			v = min(req, nominal+*bl-usage)
		default:
			v = max(0, min(req, nominal-usage))
		}
		switch k {
		case policy.Shares:
			r.Shares = v
		case policy.HostMemory:
			r.HostMemoryMiB = v
		default:
			r.GPUMemoryMiB = v
		}
	}
	return r
}

// heldOffByReservation counts the head's reservation and lists the
// workloads of the cohort's other queues that fit before it and not after,
// and that the cycle takes after the head (makeClassicalIterator: not
// borrowing first, then higher priority, then older — the head is the
// older). It returns the reservation by resource, and undoes it.
func (e *explainer) heldOffByReservation(s *Snapshot, st fifoState, h *Workload, pr policy.Priority) (map[string]string, []Waiter) {
	res := e.reservation(s, h)
	reserved := map[string]string{}
	for _, k := range policy.Kinds {
		if v := res.Get(k); v > 0 {
			reserved[e.p.Resource(k)] = k.QuantityString(v)
		}
	}
	if len(reserved) == 0 {
		return reserved, nil
	}
	headBorrows := e.borrows(s, h)
	type cand struct {
		w       *Workload
		wt      Waiter
		borrows bool
	}
	var cands []cand
	for _, qn := range e.cohortOf[h.Queue] {
		if qn == h.Queue {
			continue
		}
		for _, v := range e.variants {
			if v.cacheFree || v.t.Queue != qn {
				continue
			}
			for _, pb := range e.priorities(v.t.Namespace) {
				w := e.jobWorkload(s, v, pb)
				if s.Fits(w) {
					cands = append(cands, cand{w, Waiter{Template: v.base, Queue: qn, Priority: pb.Name, PriorityValue: pb.Value}, e.borrows(s, w)})
				}
			}
		}
		for _, n := range e.servicesBy[qn] {
			sv := e.p.Services[n]
			if sv.Mode != policy.OnDemand || st.up[n] {
				continue
			}
			w := serviceWorkload(s, e.p, n)
			if s.Fits(w) {
				cands = append(cands, cand{w, Waiter{Service: n, Queue: qn, Priority: sv.Priority, PriorityValue: w.Value}, e.borrows(s, w)})
			}
		}
	}
	hold := &Workload{Name: h.Name + " (reserved)", Queue: h.Queue, Card: h.Card, Priority: h.Priority, Value: h.Value, Request: res}
	s.Add(hold)
	defer s.Remove(hold)
	var out []Waiter
	for _, c := range cands {
		after := (!headBorrows && c.borrows) || (headBorrows == c.borrows && pr.Value >= c.wt.PriorityValue)
		if after && !s.Fits(c.w) {
			out = append(out, c.wt)
		}
	}
	return reserved, out
}

// strictFIFOFinding reports a StrictFIFO queue's blocks: one finding per
// queue, its first blocks in words.
func (e *explainer) strictFIFOFinding(qq *Queueing) {
	if len(qq.Blocks) == 0 {
		return
	}
	sev := finding.Warning
	var never []string
	for _, b := range qq.Blocks {
		if b.Head.Outcome == NoFit.String() {
			sev = finding.Error
			never = append(never, b.Head.name())
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "queue %s is StrictFIFO: a job Kueue cannot admit stays at its head and everything queued behind it waits, even what fits "+
		"(Kueue v0.17 ClusterQueue.RequeueIfNotPresent puts a StrictFIFO head straight back; BestEffortFIFO would set it aside and admit the next). ", qq.Queue)
	const listed = 3
	for i, bl := range qq.Blocks {
		if i == listed {
			fmt.Fprintf(&b, "And %d more (-o json: queueing). ", len(qq.Blocks)-listed)
			break
		}
		b.WriteString(e.blockWords(qq, bl))
		b.WriteString(". ")
	}
	if len(never) > 0 {
		who := strings.Join(dedupe(never), " or ")
		fmt.Fprintf(&b, "%s never fits (it asks more than %s could ever hold), so what waits behind it waits until it is deleted",
			strings.ToUpper(who[:1])+who[1:], qq.Queue)
	} else {
		b.WriteString("They wait until the head is admitted, when the quota it lacks frees up (a job ends, an on-demand service scales down), or until it is deleted")
	}
	if !qq.Exact {
		fmt.Fprintf(&b, " (bounded search: %d service states, every on-demand service down, all up and each alone)", qq.States)
	}
	e.add(RuleStrictFIFOBlocked, sev, []string{"queues", qq.Queue, "queueingStrategy"}, "%s", b.String())
}

// blockWords is one block in words: "With every on-demand service down, a
// batch job of gpu-large (short of nvidia.com/gpu, 0 admitted before it)
// holds off gpu-step jobs at batch in gpu-general, which would be admitted
// at once".
func (e *explainer) blockWords(qq *Queueing, bl Block) string {
	first := bl.When[0]
	// The workloads held off in any state, templates by priority.
	var who []string
	prios := map[string][]string{}
	var tmpls []string
	seen := map[string]bool{}
	for _, bs := range bl.When {
		for _, w := range bs.Waits {
			k := w.Template + "\x00" + w.Service + "\x00" + w.Queue + "\x00" + w.Priority
			if seen[k] {
				continue
			}
			seen[k] = true
			if w.Service != "" {
				who = append(who, fmt.Sprintf("service %s (%s) coming up in %s", w.Service, w.Priority, w.Queue))
				continue
			}
			t := w.Template + " jobs in " + w.Queue
			if _, ok := prios[t]; !ok {
				tmpls = append(tmpls, t)
			}
			prios[t] = append(prios[t], w.Priority)
		}
	}
	for i, t := range tmpls {
		name, queue, _ := strings.Cut(t, " jobs in ")
		tmpls[i] = fmt.Sprintf("%s jobs at %s in %s", name, strings.Join(prios[t], " or "), queue)
	}
	who = append(tmpls, who...)
	short := "it asks more than the queue could ever hold"
	if bl.Head.Outcome != NoFit.String() {
		short = "short of " + strings.Join(first.Short, ", ")
	}
	head := fmt.Sprintf("one %s job of %s (%s, %d admitted before it)", bl.Head.Priority, bl.Head.Template, short, first.Ahead)
	if bl.Head.Service != "" {
		head = fmt.Sprintf("service %s (%s) coming up (%s)", bl.Head.Service, bl.Head.Priority, short)
	}
	s := fmt.Sprintf("%s, %s holds off %s, which would be admitted at once",
		e.fifoStateWords(qq, bl.When), head, strings.Join(who, ", and "))
	if bl.How == HowReservedQuota {
		var rs []string
		for _, k := range policy.Kinds {
			if q, ok := first.Reserved[e.p.Resource(k)]; ok {
				rs = append(rs, q+" "+e.p.Resource(k))
			}
		}
		s += fmt.Sprintf(": each scheduling cycle the head, which needs preemption but finds no candidate, reserves %s of %s's quota "+
			"(scheduler.schedule, quotaResourcesToReserve; reclaimWithinCohort is not Any), which they would borrow (kubernetes-sigs/kueue#4809)",
			strings.Join(rs, ", "), qq.Queue)
	}
	return s
}

// fifoStateWords says in which service states a block happens: "in every
// service state", "with every on-demand service down", "with X up", or
// the first few.
func (e *explainer) fifoStateWords(qq *Queueing, when []BlockState) string {
	if len(when) == qq.States && qq.Exact {
		return "In every service state"
	}
	var ws []string
	for i, bs := range when {
		if i == maxListed {
			ws = append(ws, fmt.Sprintf("%d more states", len(when)-maxListed))
			break
		}
		var up []string
		for n, v := range bs.State {
			if v == policy.ServiceUp {
				up = append(up, n)
			}
		}
		sort.Strings(up)
		if len(up) == 0 {
			ws = append(ws, "every on-demand service down")
		} else {
			ws = append(ws, strings.Join(up, " and ")+" up")
		}
	}
	return "With " + strings.Join(ws, ", or with ")
}

// strictQueues are the report's StrictFIFO queues.
func (r *Report) strictQueues() []Queueing {
	var out []Queueing
	for _, q := range r.Queueing {
		if q.Strategy == policy.StrictFIFO {
			out = append(out, q)
		}
	}
	return out
}

// blockLine is one block on one line: "gpu-large at batch (wait, short of
// nvidia.com/gpu) holds off gpu-step at batch, behind it, in 1 of 2
// service states".
func blockLine(q Queueing, b Block) string {
	var who []string
	seen := map[string]bool{}
	for _, bs := range b.When {
		for _, w := range bs.Waits {
			n := w.Template
			if w.Service != "" {
				n = "service " + w.Service
			}
			n += " at " + w.Priority
			if w.Queue != q.Queue {
				n += " in " + w.Queue
			}
			if !seen[n] {
				seen[n] = true
				who = append(who, n)
			}
		}
	}
	why := "short of " + strings.Join(b.When[0].Short, ", ")
	if b.Head.Outcome == NoFit.String() {
		why = "never fits"
	}
	how := "behind it"
	if b.How == HowReservedQuota {
		how = "by the quota it reserves"
	}
	return fmt.Sprintf("%s at %s (%s) holds off %s, %s, in %d of %d service states",
		b.Head.label(), b.Head.Priority, why, strings.Join(who, ", "), how, len(b.When), q.States)
}

// writeQueueingText lists the StrictFIFO queues and their blocks.
func (r *Report) writeQueueingText(w io.Writer) {
	r.writeQueueing(w, "\n%s:\n", "  %s: %s\n", "%s")
}

// writeQueueingMarkdown is writeQueueingText for a pull request.
func (r *Report) writeQueueingMarkdown(w io.Writer) {
	if r.writeQueueing(w, "%s:\n\n", "- `%s`: %s\n", "`%s`") {
		fmt.Fprintln(w)
	}
}

// writeQueueing writes the StrictFIFO queues' blocks, one line each, with
// a heading (format head), each line as line (queue, words) and the rule's
// ID as rule; false when no queue is StrictFIFO.
func (r *Report) writeQueueing(w io.Writer, head, line, rule string) bool {
	qs := r.strictQueues()
	if len(qs) == 0 {
		return false
	}
	fmt.Fprintf(w, head, "StrictFIFO queues (a head Kueue cannot admit holds off what is queued behind it; "+
		fmt.Sprintf(rule, RuleStrictFIFOBlocked.ID)+")")
	for _, q := range qs {
		if len(q.Blocks) == 0 {
			fmt.Fprintf(w, line, q.Queue, "no head that cannot be admitted holds anything off")
			continue
		}
		for _, b := range q.Blocks {
			fmt.Fprintf(w, line, q.Queue, blockLine(q, b))
		}
	}
	return true
}
