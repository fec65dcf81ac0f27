package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Access is what one namespace's GPU workloads may use, as the policy states
// it (field access.<namespace>). A field the policy leaves out takes its
// default (Allowed).
type Access struct {
	Namespace string
	// Priorities and Queues are as stated; the Stated flags tell a stated
	// empty list (nothing) from a field left out (the default).
	Priorities       []string
	PrioritiesStated bool
	Queues           []string
	QueuesStated     bool
}

// Rights are what a namespace's GPU workloads may use, with the defaults
// resolved: the priorities (top first) and the ClusterQueues whose
// LocalQueue in the namespace they may name.
type Rights struct {
	Namespace string
	// Priorities are ordered as the ladder, top first.
	Priorities []string
	// Queues are ClusterQueue names, sorted; LocalQueues their LocalQueue
	// names in the namespace, in the same order.
	Queues      []string
	LocalQueues []string
	// PrioritiesDefault and QueuesDefault say that the policy stated
	// nothing and the default applies.
	PrioritiesDefault, QueuesDefault bool
}

// GPUNamespaces returns the namespaces GPU workloads run in, sorted: those
// with a LocalQueue, a service or a template. The API server's admission
// policy is bound to them.
func (p *Policy) GPUNamespaces() []string {
	set := map[string]bool{}
	for _, q := range p.Queues {
		for _, ns := range q.Namespaces {
			set[ns] = true
		}
	}
	for _, s := range p.Services {
		set[s.Namespace] = true
	}
	for _, t := range p.Templates {
		set[t.Namespace] = true
	}
	delete(set, "")
	return slices.Sorted(maps.Keys(set))
}

// DefaultPriorities are the priorities a namespace may use when the policy
// states none: in a job namespace its templates' default priorities and
// every one below the highest of them; in a service namespace its
// services' priorities; in a namespace with only a LocalQueue the ladder's
// default and those below it. Ordered top first.
func (p *Policy) DefaultPriorities(ns string) []string {
	return p.defaultPriorities(p.priorityUses()[ns])
}

// priorityUse is the priorities a namespace's templates (jobs) and
// services name, one entry per template or service, in no order.
type priorityUse struct{ jobs, services []string }

// priorityUses is priorityUse for every namespace, with one pass over the
// templates and services for them all.
func (p *Policy) priorityUses() map[string]priorityUse {
	out := map[string]priorityUse{}
	for _, t := range p.Templates {
		u := out[t.Namespace]
		u.jobs = append(u.jobs, t.Priority)
		out[t.Namespace] = u
	}
	for _, s := range p.Services {
		u := out[s.Namespace]
		u.services = append(u.services, s.Priority)
		out[s.Namespace] = u
	}
	return out
}

// defaultPriorities is DefaultPriorities of a namespace whose templates
// and services name the priorities in u.
func (p *Policy) defaultPriorities(u priorityUse) []string {
	allowed := map[string]bool{}
	var top *int32
	raise := func(name string) {
		pr, ok := p.Priorities[name]
		if !ok {
			return
		}
		if top == nil || pr.Value > *top {
			v := pr.Value
			top = &v
		}
	}
	for _, n := range u.jobs {
		raise(n)
	}
	for _, n := range u.services {
		allowed[n] = true
	}
	if len(u.jobs) == 0 && len(u.services) == 0 {
		raise(p.DefaultPriority())
	}
	var out []string
	for _, pr := range p.Ladder() {
		if allowed[pr.Name] || top != nil && pr.Value <= *top {
			out = append(out, pr.Name)
		}
	}
	return out
}

// Allowed returns what a namespace's GPU workloads may use: what the policy
// states (access.<ns>), and the defaults for what it leaves out.
func (p *Policy) Allowed(ns string) Rights {
	var here []string
	for n, q := range p.Queues {
		if slices.Contains(q.Namespaces, ns) {
			here = append(here, n)
		}
	}
	return p.allowed(ns, here, p.priorityUses()[ns])
}

// AllowedEach is Allowed for every namespace of GPUNamespaces, with one
// pass over the queues for them all.
func (p *Policy) AllowedEach() map[string]Rights {
	here := map[string][]string{}
	for n, q := range p.Queues {
		for _, ns := range q.Namespaces {
			here[ns] = append(here[ns], n)
		}
	}
	uses := p.priorityUses()
	out := map[string]Rights{}
	for _, ns := range p.GPUNamespaces() {
		out[ns] = p.allowed(ns, here[ns], uses[ns])
	}
	return out
}

// allowed is Allowed given the queues with a LocalQueue in ns (any order)
// and the priorities its templates and services name.
func (p *Policy) allowed(ns string, here []string, use priorityUse) Rights {
	r := Rights{Namespace: ns}
	a, stated := p.Access[ns]
	if stated && a.PrioritiesStated {
		set := map[string]bool{}
		for _, n := range a.Priorities {
			set[n] = true
		}
		for _, pr := range p.Ladder() {
			if set[pr.Name] {
				r.Priorities = append(r.Priorities, pr.Name)
			}
		}
	} else {
		r.Priorities, r.PrioritiesDefault = p.defaultPriorities(use), true
	}
	var queues []string
	if stated && a.QueuesStated {
		queues = a.Queues
	} else {
		// Only the queues with a LocalQueue here: the loop below keeps no
		// other.
		r.QueuesDefault = true
		queues = here
	}
	seen := map[string]bool{}
	for _, n := range slices.Sorted(slices.Values(queues)) {
		q, ok := p.Queues[n]
		if !ok || seen[n] || !slices.Contains(q.Namespaces, ns) {
			continue
		}
		seen[n] = true
		r.Queues = append(r.Queues, n)
		r.LocalQueues = append(r.LocalQueues, q.LocalQueue)
	}
	return r
}

// MayUsePriority reports whether the namespace may use the priority.
func (r Rights) MayUsePriority(name string) bool { return slices.Contains(r.Priorities, name) }

// MayUseLocalQueue reports whether the namespace may use the LocalQueue.
func (r Rights) MayUseLocalQueue(name string) bool { return slices.Contains(r.LocalQueues, name) }

// RuleAccess is a namespace's stated access that contradicts the policy's
// own workloads there.
var RuleAccess = vetRule("access",
	"a namespace's access names priorities and queues the policy defines, in a namespace where GPU workloads run, and leaves its own services and templates the priority and queue they use: the API server would reject them")

func (c *checker) access() {
	p := c.p
	gpu := p.GPUNamespaces()
	for _, ns := range slices.Sorted(maps.Keys(p.Access)) {
		a := p.Access[ns]
		if !slices.Contains(gpu, ns) {
			c.add(RuleAccess, []string{"access", ns}, "access.%s names a namespace no queue, service or template of the policy uses (%s); the admission policy is bound only to those",
				ns, strings.Join(gpu, ", "))
			continue
		}
		for i, n := range a.Priorities {
			_, ok := p.Priorities[n]
			c.ref("priority", n, ok, "access", ns, "priorities", fmt.Sprint(i))
		}
		for i, n := range a.Queues {
			q, ok := p.Queues[n]
			if c.ref("queue", n, ok, "access", ns, "queues", fmt.Sprint(i)) && !slices.Contains(q.Namespaces, ns) {
				c.add(RuleNoLocalQueue, []string{"access", ns, "queues", fmt.Sprint(i)},
					"access.%s.queues names queue %q, which has LocalQueues only in %s", ns, n, strings.Join(q.Namespaces, ", "))
			}
		}
		r := p.Allowed(ns)
		for _, n := range p.ServiceNames() {
			s := p.Services[n]
			if s.Namespace != ns {
				continue
			}
			if a.PrioritiesStated && !r.MayUsePriority(s.Priority) {
				c.add(RuleAccess, []string{"access", ns, "priorities"}, "access.%s.priorities leaves out %q, the priority of service %s in that namespace: the API server would reject its pods", ns, s.Priority, n)
			}
			if a.QueuesStated && !slices.Contains(r.Queues, s.Queue) {
				c.add(RuleAccess, []string{"access", ns, "queues"}, "access.%s.queues leaves out %q, the queue of service %s in that namespace: the API server would reject its pods", ns, s.Queue, n)
			}
		}
		for _, n := range p.TemplateNames() {
			t := p.Templates[n]
			if t.Namespace != ns {
				continue
			}
			if a.PrioritiesStated && !r.MayUsePriority(t.Priority) {
				c.add(RuleAccess, []string{"access", ns, "priorities"}, "access.%s.priorities leaves out %q, the default priority of template %s in that namespace: its steps would be rejected unless every caller chose another", ns, t.Priority, n)
			}
			if a.QueuesStated && !slices.Contains(r.Queues, t.Queue) {
				c.add(RuleAccess, []string{"access", ns, "queues"}, "access.%s.queues leaves out %q, the queue of template %s in that namespace: the API server would reject its steps", ns, t.Queue, n)
			}
		}
	}
}
