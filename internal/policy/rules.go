package policy

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpupolicy/gpupolicy/internal/finding"
)

// vetRule registers a rule Check applies: vet refuses a policy that breaks
// it (every vet rule is an error).
func vetRule(id, reason string) finding.Rule {
	return finding.Register(finding.Rule{ID: id, Verb: finding.Vet, Severity: finding.Error, Reason: reason})
}

// The rules Check applies, and the CUE ones Load reports. IDs are stable:
// reports and suppressions name them. gpupolicy vet --help lists them from
// the registry (internal/finding).
var (
	RuleSyntax = vetRule("syntax",
		"a policy CUE cannot parse cannot be vetted, nor rendered")
	RuleSchema = vetRule("schema",
		"the policy follows the schema embedded in gpupolicy: the shapes and bounds every stage relies on")
	RuleUnknownReference = vetRule("unknown-reference",
		"a name must refer to a card, queue, priority, lock, template or on-demand service the policy defines")
	RuleDefaultPriority = vetRule("default-priority",
		"exactly one priority is the default, the one a GPU step gets when it names none")
	RuleDuplicatePriority = vetRule("duplicate-priority-value",
		"two rungs with one value are one rung: Kueue cannot order them")
	RuleLimitWithoutCohort = vetRule("limit-without-cohort",
		"borrowingLimit and lendingLimit only mean something inside a cohort (Kueue rejects them without cohortName)")
	RuleLendingOverNominal = vetRule("lending-over-nominal",
		"a queue cannot lend more than its nominalQuota (Kueue validation)")
	RuleLockCycle = vetRule("lock-order-cycle",
		"a cycle in the lock order lets two jobs each hold the lock the other waits for")
	RuleLockOrder = vetRule("lock-order",
		"a template takes its locks in the policy's acquisition order (the cache lock before the main lock)")
	RuleSharesOverCard = vetRule("shares-over-card",
		"a pod that asks more shares than the card has can never be scheduled")
	RuleUnitsMixed = vetRule("units-mixed",
		"GPU-memory quantities use one form: a plain 1024 and \"1024Mi\" differ by a factor of 1,048,576 once they reach Kubernetes")
	RuleQueueLacksFlavor = vetRule("queue-lacks-card",
		"a template or service can only be admitted by a queue that has quota for its card")
	RuleNoLocalQueue = vetRule("no-local-queue",
		"a template or service runs in a namespace where its queue has a LocalQueue")
	RuleDuplicateLock = vetRule("duplicate-lock",
		"a template takes each lock once")
	RuleQuotaOverCard = vetRule("quota-over-card",
		"the nominal share quotas of the queues and Cohorts on a card add up to no more than the card's shares: a quota the card cannot back admits jobs that never schedule")
	RuleNodeSelector = vetRule("node-selector",
		"a card's node selector is a Kubernetes label selector that requires the card's nodeLabels: Kueue places the card's jobs only on nodes carrying them, and reconcile makes exactly the selected nodes ready")
	RuleNodeLabels = vetRule("node-labels",
		"a card's nodeLabels are label keys and values Kubernetes accepts: Kueue's ResourceFlavor webhook refuses any other (ValidateResourceFlavor, metav1 validation.ValidateLabels), so reconcile could not apply the card")
	RuleCardWithoutNodes = vetRule("card-without-nodes",
		"a card a queue gives quota for needs nodes (nodeLabels or nodes.selector): without them no node is made ready and every job Kueue admits on it stays Pending")
	RuleBorrowWithoutReclaim = vetRule("borrow-without-reclaim",
		"Kueue rejects a ClusterQueue whose borrowWithinCohort preempts while reclaimWithinCohort is Never (CEL rule of ClusterQueuePreemption, v1beta2)")
)

// Check applies the semantic rules and returns every violation, sorted by
// position. An empty result means the policy is consistent.
func (p *Policy) Check() finding.List {
	c := checker{p: p}
	c.references()
	c.priorities()
	c.quotas()
	c.preemption()
	c.locks()
	c.shares()
	c.units()
	c.nodes()
	c.text()
	c.declaration()
	c.access()
	c.multiShare()
	c.lastActivity()
	c.cohorts()
	c.ds.SortByPos()
	return c.ds
}

type checker struct {
	p  *Policy
	ds finding.List
}

func (c *checker) add(r finding.Rule, path []string, format string, args ...any) {
	f := r.Newf(format, args...)
	f.Path, f.Pos = PathString(path...), c.p.Pos(path...)
	c.ds = append(c.ds, f)
}

func (c *checker) ref(kind string, name string, known bool, path ...string) bool {
	if !known {
		c.add(RuleUnknownReference, path, "%s names %s %q, which the policy does not define", PathString(path...), kind, name)
	}
	return known
}

func (c *checker) references() {
	p := c.p
	for _, n := range p.ServiceNames() {
		s := p.Services[n]
		_, okQ := p.Queues[s.Queue]
		_, okC := p.Cards[s.Card]
		c.ref("queue", s.Queue, okQ, "services", n, "queue")
		c.ref("card", s.Card, okC, "services", n, "card")
		_, okP := p.Priorities[s.Priority]
		c.ref("priority", s.Priority, okP, "services", n, "priority")
		if okQ && okC {
			c.queueServes(s.Queue, s.Card, s.Namespace, "services", n)
		}
	}
	for _, n := range p.TemplateNames() {
		t := p.Templates[n]
		_, okQ := p.Queues[t.Queue]
		_, okC := p.Cards[t.Card]
		c.ref("queue", t.Queue, okQ, "templates", n, "queue")
		c.ref("card", t.Card, okC, "templates", n, "card")
		if t.Priority != "" {
			_, ok := p.Priorities[t.Priority]
			c.ref("priority", t.Priority, ok, "templates", n, "priority")
		}
		for _, v := range VariantsOf(t) {
			for i, l := range v.Locks {
				_, ok := p.Locks[l]
				c.ref("lock", l, ok, append(v.Path(), "locks", fmt.Sprint(i))...)
			}
		}
		if okQ && okC {
			c.queueServes(t.Queue, t.Card, t.Namespace, "templates", n)
		}
	}
	for _, n := range p.QueueNames() {
		q := p.Queues[n]
		for _, f := range q.FlavorNames() {
			_, ok := p.Cards[f]
			c.ref("card", f, ok, "queues", n, "flavors", f)
		}
		if th := q.Preemption.MaxPriorityThreshold; th != "" {
			_, ok := p.Priorities[th]
			c.ref("priority", th, ok, "queues", n, "preemption", "borrowWithinCohort", "maxPriorityThreshold")
		}
	}
	for _, n := range p.LockNames() {
		for i, b := range p.Locks[n].TakenBefore {
			_, ok := p.Locks[b]
			c.ref("lock", b, ok, "locks", n, "takenBefore", fmt.Sprint(i))
		}
		if q := p.Locks[n].FromQueue; q != nil {
			c.lockFromQueue(n, q)
		}
	}
}

// lockFromQueue checks the names of a lock sized from quota: its queue,
// template and the services its state names (on-demand ones only: an
// always-on service is always up). Whether the size computes to at least
// one is the admission model's to say (rule lock-from-quota, render.Check).
func (c *checker) lockFromQueue(lock string, q *QueueAdmits) {
	p := c.p
	_, ok := p.Queues[q.Queue]
	c.ref("queue", q.Queue, ok, "locks", lock, "size", "fromQueue")
	if q.Template != "" {
		_, ok := p.Templates[q.Template]
		c.ref("template", q.Template, ok, "locks", lock, "size", "template")
	}
	for _, s := range q.NamedServices {
		path := []string{"locks", lock, "size", "state", s}
		sv, ok := p.Services[s]
		switch {
		case !ok:
			c.add(RuleUnknownReference, path, "%s names service %q, which the policy does not define (its on-demand services: %s)",
				PathString(path...), s, orNone(p.OnDemandServices()))
		case sv.Mode != OnDemand:
			c.add(RuleUnknownReference, path, "%s names service %q, which is always on: a state names on-demand services only (%s)",
				PathString(path...), s, orNone(p.OnDemandServices()))
		}
	}
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// queueServes checks that a queue has quota for the card and a LocalQueue in
// the namespace of whoever submits to it.
func (c *checker) queueServes(queue, card, ns string, path ...string) {
	q := c.p.Queues[queue]
	if _, ok := q.Flavors[card]; !ok {
		c.add(RuleQueueLacksFlavor, append(path, "card"), "%s runs on card %q, but queue %q has no quota for it",
			PathString(path...), card, queue)
	}
	for _, n := range q.Namespaces {
		if n == ns {
			return
		}
	}
	c.add(RuleNoLocalQueue, append(path, "namespace"), "%s runs in namespace %q, but queue %q has LocalQueues only in %s",
		PathString(path...), ns, queue, strings.Join(q.Namespaces, ", "))
}

func (c *checker) priorities() {
	var defaults []string
	byValue := map[int32][]string{}
	for _, pr := range c.p.Ladder() {
		if pr.Default {
			defaults = append(defaults, pr.Name)
		}
		byValue[pr.Value] = append(byValue[pr.Value], pr.Name)
	}
	switch {
	case len(defaults) == 0:
		c.add(RuleDefaultPriority, []string{"priorities"}, "no priority is the default; mark exactly one with default: true")
	case len(defaults) > 1:
		for _, d := range defaults {
			c.add(RuleDefaultPriority, []string{"priorities", d, "default"},
				"priorities %s are all marked default; exactly one may be", strings.Join(defaults, ", "))
		}
	}
	for v, names := range byValue {
		if len(names) > 1 {
			sort.Strings(names)
			c.add(RuleDuplicatePriority, []string{"priorities", names[1], "value"},
				"priorities %s share the value %d", strings.Join(names, " and "), v)
		}
	}
}

func (c *checker) quotas() {
	for _, n := range c.p.QueueNames() {
		q := c.p.Queues[n]
		for _, f := range q.FlavorNames() {
			fq := q.Flavors[f]
			for _, k := range Kinds {
				quota := fq.Get(k)
				field := fieldOf(k)
				path := []string{"queues", n, "flavors", f, field}
				if q.Cohort == "" && quota.BorrowingLimit != nil {
					c.add(RuleLimitWithoutCohort, append(path, "borrowingLimit"),
						"queue %q sets a %s borrowingLimit but has no cohort to borrow from", n, k)
				}
				if q.Cohort == "" && quota.LendingLimit != nil {
					c.add(RuleLimitWithoutCohort, append(path, "lendingLimit"),
						"queue %q sets a %s lendingLimit but has no cohort to lend to", n, k)
				}
				if quota.LendingLimit != nil && *quota.LendingLimit > quota.Nominal {
					lends := FormatAmount(k, *quota.LendingLimit) // "3 shares" says its kind
					if k != Shares {
						lends += " of " + k.String()
					}
					c.add(RuleLendingOverNominal, append(path, "lendingLimit"),
						"queue %q lends %s but owns only %s", n, lends, FormatAmount(k, quota.Nominal))
				}
			}
		}
	}
}

func (c *checker) preemption() {
	for _, n := range c.p.QueueNames() {
		pr := c.p.Queues[n].Preemption
		if pr.BorrowWithinCohort != "Never" && pr.ReclaimWithinCohort == "Never" {
			c.add(RuleBorrowWithoutReclaim, []string{"queues", n, "preemption", "borrowWithinCohort", "policy"},
				"queue %q sets borrowWithinCohort %s with reclaimWithinCohort Never; Kueue rejects it (set reclaimWithinCohort)", n, pr.BorrowWithinCohort)
		}
	}
}

func fieldOf(k Kind) string {
	switch k {
	case Shares:
		return "shares"
	case HostMemory:
		return "hostMemory"
	default:
		return "gpuMemory"
	}
}

// LockOrder returns the locks in a topological order of takenBefore (ties by
// name), or the locks on a cycle if there is one.
func (p *Policy) LockOrder() (order []string, cycle []string) {
	state := map[string]int{} // 0 new, 1 on stack, 2 done
	var stack []string
	var post []string
	var visit func(n string) bool
	visit = func(n string) bool {
		state[n] = 1
		stack = append(stack, n)
		next := append([]string(nil), p.Locks[n].TakenBefore...)
		sort.Strings(next)
		for _, m := range next {
			if _, ok := p.Locks[m]; !ok {
				continue
			}
			switch state[m] {
			case 1:
				for i, s := range stack {
					if s == m {
						cycle = append(append([]string(nil), stack[i:]...), m)
					}
				}
				return false
			case 0:
				if !visit(m) {
					return false
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = 2
		post = append(post, n)
		return true
	}
	for _, n := range p.LockNames() {
		if state[n] == 0 && !visit(n) {
			return nil, cycle
		}
	}
	for i := len(post) - 1; i >= 0; i-- {
		order = append(order, post[i])
	}
	return order, nil
}

func (c *checker) locks() {
	p := c.p
	if _, cycle := p.LockOrder(); cycle != nil {
		c.add(RuleLockCycle, []string{"locks", cycle[0], "takenBefore"},
			"the lock order has a cycle: %s", strings.Join(cycle, " → "))
		return
	}
	// before[a][b]: a must be taken before b (transitively).
	before := func(a, b string) bool {
		seen := map[string]bool{}
		var walk func(string) bool
		walk = func(x string) bool {
			for _, y := range p.Locks[x].TakenBefore {
				if y == b {
					return true
				}
				if !seen[y] {
					seen[y] = true
					if walk(y) {
						return true
					}
				}
			}
			return false
		}
		return walk(a)
	}
	check := func(locks []string, path ...string) {
		seen := map[string]bool{}
		for i, l := range locks {
			if seen[l] {
				c.add(RuleDuplicateLock, append(path, fmt.Sprint(i)), "%s takes lock %q twice", PathString(path...), l)
			}
			seen[l] = true
			for _, later := range locks[i+1:] {
				if before(later, l) {
					c.add(RuleLockOrder, append(path, fmt.Sprint(i)),
						"%s takes %q before %q, but the policy orders %q first", PathString(path...), l, later, later)
				}
			}
		}
	}
	for _, v := range p.Variants() {
		check(v.Locks, append(v.Path(), "locks")...)
	}
}

func (c *checker) shares() {
	p := c.p
	// The queues holding shares of each card, in name order: one pass
	// over the queues, not one per card.
	// A Cohort's own nominalQuota is quota on top of its queues' (Kueue
	// pools it with theirs), so it counts too.
	// The finding points at the largest holder's nominalQuota (the first
	// of equal ones, queues before Cohorts): the quota to cut first.
	type holding struct {
		total   int64
		largest int64
		at      []string
		holders []string
		cohorts bool
	}
	held := map[string]*holding{}
	hold := func(scope, name, label string, flavors map[string]FlavorQuotas) {
		for card, fq := range flavors {
			if fq.Shares.Nominal <= 0 {
				continue
			}
			h := held[card]
			if h == nil {
				h = &holding{}
				held[card] = h
			}
			if fq.Shares.Nominal > h.largest {
				h.largest, h.at = fq.Shares.Nominal, []string{scope, name, "flavors", card, "shares", "nominalQuota"}
			}
			h.total += fq.Shares.Nominal
			h.holders = append(h.holders, fmt.Sprintf("%s%s %d", label, name, fq.Shares.Nominal))
			h.cohorts = h.cohorts || scope == "cohorts"
		}
	}
	for _, qn := range p.QueueNames() {
		hold("queues", qn, "", p.Queues[qn].Flavors)
	}
	for _, cn := range p.CohortNames() {
		hold("cohorts", cn, "cohort ", p.Cohorts[cn].Flavors)
	}
	for _, card := range p.CardNames() {
		h := held[card]
		if h == nil {
			h = &holding{}
		}
		if h.total > p.Cards[card].Shares {
			whose := "the queues' nominal quotas"
			if h.cohorts {
				whose = "the nominal quotas of the queues and Cohorts"
			}
			c.add(RuleQuotaOverCard, h.at,
				"%s on card %q add up to %d shares (%s), but the card has %d",
				whose, card, h.total, strings.Join(h.holders, ", "), p.Cards[card].Shares)
		}
	}
	for _, n := range p.ServiceNames() {
		s := p.Services[n]
		if card, ok := p.Cards[s.Card]; ok && s.Request.Shares > card.Shares {
			c.add(RuleSharesOverCard, []string{"services", n, "shares"},
				"service %q asks %d shares, but card %q has %d", n, s.Request.Shares, s.Card, card.Shares)
		}
	}
	for _, n := range p.TemplateNames() {
		t := p.Templates[n]
		if card, ok := p.Cards[t.Card]; ok && t.Request.Shares > card.Shares {
			c.add(RuleSharesOverCard, []string{"templates", n, "shares"},
				"template %q asks %d shares, but card %q has %d", n, t.Request.Shares, t.Card, card.Shares)
		}
	}
}

// UnitsMixed reports whether the policy writes GPU memory both as plain
// integers and with the Mi suffix; plain and suffixed list the fields of each
// form.
func (p *Policy) UnitsMixed() (plain, suffixed []QuantityForm) {
	for _, f := range p.GPUMemoryForms {
		if f.Suffixed {
			suffixed = append(suffixed, f)
		} else {
			plain = append(plain, f)
		}
	}
	if len(plain) == 0 || len(suffixed) == 0 {
		return nil, nil
	}
	// GPUMemoryForms is gathered from maps: sort by path so that messages
	// name the same example on every run.
	byPath := func(a, b QuantityForm) int { return strings.Compare(PathString(a.Path...), PathString(b.Path...)) }
	slices.SortStableFunc(plain, byPath)
	slices.SortStableFunc(suffixed, byPath)
	return plain, suffixed
}

func (c *checker) units() {
	plain, suffixed := c.p.UnitsMixed()
	if plain == nil {
		return
	}
	// Report the minority form, each at its own position.
	minority, majority, how := suffixed, plain, "with the Mi suffix"
	if len(plain) < len(suffixed) {
		minority, majority, how = plain, suffixed, "as a plain integer"
	}
	for _, f := range minority {
		c.add(RuleUnitsMixed, f.Path, "%s is written %s while %d other GPU-memory quantities (e.g. %s) use the other form",
			PathString(f.Path...), how, len(majority), PathString(majority[0].Path...))
	}
}

// nodes checks each card's node selector and that every card a queue gives
// quota for has nodes.
func (c *checker) nodes() {
	p := c.p
	used := map[string]string{}
	for _, qn := range p.QueueNames() {
		for _, f := range p.Queues[qn].FlavorNames() {
			if _, ok := used[f]; !ok {
				used[f] = qn
			}
		}
	}
	for _, n := range p.CardNames() {
		card := p.Cards[n]
		for _, k := range slices.Sorted(maps.Keys(card.NodeLabels)) {
			// One label at a time, as the webhook checks each: each
			// finding at its own key, in a fixed order.
			for _, e := range metav1validation.ValidateLabels(map[string]string{k: card.NodeLabels[k]}, field.NewPath("nodeLabels")) {
				c.add(RuleNodeLabels, []string{"cards", n, "nodeLabels", k}, "card %q: nodeLabels %q: %s", n, k, e.ErrorBody())
			}
		}
		if card.NodeSelector != "" {
			path := []string{"cards", n, "nodes", "selector"}
			sel, err := card.Nodes()
			if err != nil {
				c.add(RuleNodeSelector, path, "card %q: nodes.selector %q is not a label selector: %v", n, card.NodeSelector, err)
				continue
			}
			if miss := missingNodeLabels(sel, card.NodeLabels); len(miss) > 0 {
				c.add(RuleNodeSelector, path,
					"card %q: nodes.selector %q can pick nodes without %s, where Kueue never places the card's jobs (nodeLabels); require them in the selector",
					n, card.NodeSelector, strings.Join(miss, ", "))
			}
			continue
		}
		if q, ok := used[n]; ok && len(card.NodeLabels) == 0 {
			c.add(RuleCardWithoutNodes, []string{"cards", n},
				"card %q has quota in queue %q but no nodes: set nodeLabels (e.g. its GPU feature discovery product label) or nodes.selector", n, q)
		}
	}
}
