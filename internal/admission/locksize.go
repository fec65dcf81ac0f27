package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// RuleLockFromQuota is a lock sized from quota (schema #QueueAdmits) whose
// size the admission model cannot give as one or more. vet applies it
// (through render.Check), and render and explain refuse such a policy.
var RuleLockFromQuota = finding.Register(finding.Rule{ID: "lock-from-quota", Verb: finding.Vet, Severity: finding.Error,
	Reason: "a lock sized from quota holds as many steps as its queue admits at once: a size that computes to 0 lets no step ever start, and jobs of different requests need the template that sizes it named"})

// LockSize is how a lock sized from quota got its size: the jobs of one
// template that one ClusterQueue admits at once, without preempting
// anything, in one service state, after the services that are up in it
// (Kueue's quota arithmetic: Snapshot.Decide). Its JSON form is part of the
// explain contract (README, "lockSizes").
type LockSize struct {
	// Lock is the lock's name; Size what it computes to.
	Lock string `json:"lock"`
	Size int64  `json:"size"`
	// Queue is the ClusterQueue, Template the template whose default
	// request each job asks, Card its card.
	Queue    string `json:"queue"`
	Template string `json:"template"`
	Card     string `json:"card"`
	// Request is what each job asks, by resource name (Kubernetes
	// quantities, as in a capacity row's margin).
	Request map[string]string `json:"request"`
	// State maps every on-demand service to "up" or "down".
	State map[string]string `json:"state"`
	// Unadmitted lists the services up in State that Kueue does not admit
	// themselves (they hold nothing; finding service-unadmitted).
	Unadmitted []string `json:"unadmitted"`
	// Binding lists the resources the next job does not fit in once Size
	// jobs run (Kinds order).
	Binding []string `json:"binding"`
	// Words is the derivation in one sentence: "lock main: 4 = jobs of
	// gpu-step (...) ClusterQueue gpu-general admits at once with every
	// on-demand service down (qwen2-5-7b); the next does not fit in
	// nvidia.com/gpu, memory".
	Words string `json:"words"`
}

// SizeLocks returns the policy with the size of every lock sized from
// quota (policy.Lock.FromQueue) computed from the admission model, and how
// each got it, by lock name. It returns p itself when no lock is sized from
// quota, and otherwise a copy with a Locks map of its own: p is not
// changed. Calling it on its own result computes the same sizes again.
//
// The policy must have passed policy.Check (its queue, template and
// service names exist). The error is a finding.List (rule
// lock-from-quota, at the lock's size field) when a size computes to 0, or
// when no single template sizes it: none takes the lock through its queue,
// the named one runs through another queue, or those that do ask
// different requests and none is named.
//
// It first sizes every exclusive template's request (SizeExclusive), so
// that everything downstream reads the request render writes; its
// findings (rules exclusive-fits, exclusive-alone, exclusive-jobs) are the
// error the same way.
func SizeLocks(p *policy.Policy) (*policy.Policy, []LockSize, error) {
	p, sizes, _, err := sizeLocks(p)
	return p, sizes, err
}

// sizeLocks is SizeLocks, with the analyses of the exclusive templates it
// sized (sizeExclusive), by name, for Explain's Exclusives.
func sizeLocks(p *policy.Policy) (*policy.Policy, []LockSize, map[string]Exclusive, error) {
	p, analysed, xs := sizeExclusive(p)
	if len(xs) > 0 {
		return nil, nil, nil, xs
	}
	var sized []string
	for _, n := range p.LockNames() {
		if p.Locks[n].FromQueue != nil {
			sized = append(sized, n)
		}
	}
	if len(sized) == 0 {
		return p, nil, analysed, nil
	}
	out := *p
	out.Locks = maps.Clone(p.Locks)
	var sizes []LockSize
	var ds finding.List
	for _, n := range sized {
		l := p.Locks[n]
		ls, f := sizeLock(p, l)
		if f != nil {
			f.Path, f.Pos = policy.PathString("locks", n, "size"), p.Pos("locks", n, "size")
			ds = append(ds, *f)
			continue
		}
		l.Size = ls.Size
		out.Locks[n] = l
		sizes = append(sizes, ls)
	}
	if len(ds) > 0 {
		ds.SortByPos()
		return nil, nil, nil, ds
	}
	return &out, sizes, analysed, nil
}

// sizeLock computes one lock's size, or the finding that says why it has
// none.
func sizeLock(p *policy.Policy, l policy.Lock) (LockSize, *finding.Finding) {
	q := l.FromQueue
	fail := func(format string, args ...any) (LockSize, *finding.Finding) {
		f := RuleLockFromQuota.Newf("lock %s: "+format, append([]any{l.Name}, args...)...)
		return LockSize{}, &f
	}
	if _, ok := p.Queues[q.Queue]; !ok {
		return fail("fromQueue names queue %q, which the policy does not define", q.Queue)
	}
	t, f := lockTemplate(p, l)
	if f != nil {
		return LockSize{}, f
	}
	ls := LockSize{Lock: l.Name, Queue: q.Queue, Template: t.Name, Card: t.Card,
		Request: map[string]string{}, State: map[string]string{}, Unadmitted: []string{}, Binding: []string{}}
	for _, k := range policy.Kinds {
		if v := t.Request.Get(k); v > 0 {
			ls.Request[p.Resource(k)] = k.QuantityString(v)
		}
	}
	onDemand := p.OnDemandServices()
	for _, n := range onDemand {
		ls.State[n] = q.State[n]
	}

	// Services first, as Explain admits them (servicesSnapshot).
	var up []string
	for _, n := range onDemand {
		if ls.State[n] == policy.ServiceUp {
			up = append(up, n)
		}
	}
	s, unadmitted := servicesSnapshot(p, up)
	ls.Unadmitted = append(ls.Unadmitted, unadmitted...)
	// Then jobs of the template until the next one does not fit: no
	// preemption, so the count is the same at every priority.
	pr := p.Priorities[t.Priority]
	for ls.Size < maxJobs {
		w := s.NewWorkload(Workload{Name: t.Name + " job", Template: t.Name, Queue: t.Queue, Card: t.Card,
			Priority: pr.Name, Value: pr.Value, Request: t.Request})
		d := s.Decide(w)
		if d.Outcome != Admit {
			for _, fr := range d.Short {
				ls.Binding = append(ls.Binding, p.Resource(fr.Kind))
			}
			break
		}
		s.Add(w)
		ls.Size++
	}
	ls.Words = lockSizeWords(p, l, ls, t)
	if ls.Size == 0 {
		f := RuleLockFromQuota.New(ls.Words + ": a lock of 0 lets no step that takes it ever start; size it from a state in which the queue admits a job, or give it a number")
		return LockSize{}, &f
	}
	return ls, nil
}

// lockTemplate is the template whose jobs size a lock: the one the policy
// names, or the one template that takes the lock through the queue (its
// cache-free variant asks the same), or several that ask one request on
// one card.
func lockTemplate(p *policy.Policy, l policy.Lock) (policy.Template, *finding.Finding) {
	q := l.FromQueue
	fail := func(format string, args ...any) (policy.Template, *finding.Finding) {
		f := RuleLockFromQuota.Newf("lock %s: "+format, append([]any{l.Name}, args...)...)
		return policy.Template{}, &f
	}
	if q.Template != "" {
		t, ok := p.Templates[q.Template]
		switch {
		case !ok:
			return fail("template names %q, which the policy does not define", q.Template)
		case t.Queue != q.Queue:
			return fail("its jobs are %s's, which run through queue %s, not %s (fromQueue)", t.Name, t.Queue, q.Queue)
		}
		return t, nil
	}
	var takers []policy.Template
	seen := map[string]bool{}
	for _, v := range p.Variants() {
		t := v.Template
		if t.Queue != q.Queue || seen[t.Name] {
			continue
		}
		for _, n := range v.Locks {
			if n == l.Name {
				takers = append(takers, t)
				seen[t.Name] = true
				break
			}
		}
	}
	if len(takers) == 0 {
		return fail("no template takes it through queue %s, so no job sizes it: name one with template", q.Queue)
	}
	for _, t := range takers[1:] {
		// Two templates on the same cards (policy.TemplateCards: anyCard
		// ones may name different cards) asking alike size it alike.
		if a, b := p.TemplateCards(takers[0]), p.TemplateCards(t); !slices.Equal(a, b) {
			return fail("templates %s (cards %s) and %s (cards %s) take it through queue %s on different cards: name the one whose jobs size it with template",
				takers[0].Name, strings.Join(a, ", "), t.Name, strings.Join(b, ", "), q.Queue)
		}
		if t.Request != takers[0].Request {
			return fail("templates %s (%s) and %s (%s) take it through queue %s with different requests: name the one whose jobs size it with template",
				takers[0].Name, requestWords(takers[0]), t.Name, requestWords(t), q.Queue)
		}
	}
	return takers[0], nil
}

// requestWords is a job's request: "1 share, 2,048 MiB host memory,
// 1,024 MiB GPU memory".
func requestWords(t policy.Template) string {
	var parts []string
	for _, k := range policy.Kinds {
		if v := t.Request.Get(k); v > 0 {
			s := policy.FormatAmount(k, v)
			if k != policy.Shares {
				s += " " + k.String()
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ", ")
}

// lockSizeWords is the derivation: "lock main: 4 = jobs of gpu-step (1
// share, 2,048 MiB host memory, 1,024 MiB GPU memory) ClusterQueue
// gpu-general admits at once with every on-demand service down
// (qwen2-5-7b); the next does not fit in nvidia.com/gpu, memory".
func lockSizeWords(p *policy.Policy, l policy.Lock, ls LockSize, t policy.Template) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lock %s: %d = jobs of %s (%s) ClusterQueue %s admits at once %s", l.Name, ls.Size, t.Name, requestWords(t), ls.Queue, stateWords(p, l.FromQueue, ls.State))
	if len(ls.Unadmitted) > 0 {
		fmt.Fprintf(&b, " (Kueue does not admit %s itself, so it holds nothing)", strings.Join(ls.Unadmitted, ", "))
	}
	switch {
	case ls.Size >= maxJobs:
		fmt.Fprintf(&b, "; the model stops counting at %s", policy.Thousands(maxJobs))
	case ls.Size == 0 && len(ls.Binding) > 0:
		fmt.Fprintf(&b, "; not one fits in %s", strings.Join(ls.Binding, ", "))
	case len(ls.Binding) > 0:
		fmt.Fprintf(&b, "; the next does not fit in %s", strings.Join(ls.Binding, ", "))
	}
	return b.String()
}

// stateWords says the state as the policy wrote it: "with every on-demand
// service down (qwen2-5-7b)", "with qwen2-5-7b up".
func stateWords(p *policy.Policy, q *policy.QueueAdmits, state map[string]string) string {
	onDemand := p.OnDemandServices()
	if len(onDemand) == 0 {
		return "(the policy has no on-demand services)"
	}
	switch q.Named {
	case policy.StateOnDemandDown:
		return fmt.Sprintf("with every on-demand service down (%s)", strings.Join(onDemand, ", "))
	case policy.StateOnDemandUp:
		return fmt.Sprintf("with every on-demand service up (%s)", strings.Join(onDemand, ", "))
	}
	return "with " + policy.StateLabel(state)
}
