package admission

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// Who may evict whom. The policy's access rules (policy.Allowed) say which
// priorities and LocalQueues each namespace's GPU workloads may use — the
// API server enforces them (render's admission policies). Through each
// ClusterQueue's preemption settings that decides whose workloads a
// namespace's can evict, under Kueue v0.17's classical preemption
// (Snapshot.Decide, classicalTargets):
//
//   - withinClusterQueue: workloads in the preemptor's own ClusterQueue,
//     whatever their namespace, at a priority the setting allows
//     (LowerPriority: strictly lower; LowerOrNewerEqualPriority: lower, or
//     equal and newer; preemptioncommon.SatisfiesPreemptionPolicy);
//   - reclaimWithinCohort: workloads in another ClusterQueue of the cohort,
//     only while that queue is above its nominal quota
//     (classical.candidateIsValid skips queues within nominal,
//     kubernetes-sigs/kueue#10171), for a preemptor that fits its own
//     queue's nominal quota (a hierarchical reclaim, or a reclaim without
//     borrowing), so the preemptor's queue must own some of what the other
//     borrows; LowerPriority or Any;
//   - borrowWithinCohort: the same victims while the preemptor itself
//     borrows, at a priority below the preemptor's and at most
//     maxPriorityThreshold (Kueue's InCohortReclaimWhileBorrowing).
//
// A path is listed when the settings and the two namespaces' priorities
// allow it. It is marked impossible, with the reason, when the victims'
// queue can never be above its nominal quota, when the preemptor's queue
// owns nothing to reclaim or can never borrow, when Kueue rejects the
// ClusterQueue (finding preemption-rejected), or when explain's search
// finds the setting can never fire (finding dead-preemption). A possible
// path says what Kueue permits, not that it happens: it takes a
// preemptor that does not fit and victims that hold what it needs.
// Workloads that name no WorkloadPriorityClass run at priority 0 (or the
// cluster's default PriorityClass) and are not listed.

// NamespaceAccess is what one namespace's GPU workloads may use and whose
// workloads they can evict.
type NamespaceAccess struct {
	Namespace string `json:"namespace"`
	// Priorities are the WorkloadPriorityClasses its workloads may name,
	// top first; PrioritiesDefault says the policy states none for it and
	// the default applies (policy.DefaultPriorities).
	Priorities        []string `json:"priorities"`
	PrioritiesDefault bool     `json:"prioritiesDefault"`
	// Queues are the ClusterQueues whose LocalQueue in the namespace it may
	// name, sorted; LocalQueues their LocalQueue names, in the same order.
	Queues        []string `json:"queues"`
	LocalQueues   []string `json:"localQueues"`
	QueuesDefault bool     `json:"queuesDefault"`
	// Evicts lists the paths by which its workloads can evict those of
	// other namespaces, and those the settings mean but Kueue never takes.
	Evicts []EvictionRight `json:"evicts"`
}

// EvictionRight is one path by which a namespace's workloads evict another
// namespace's: the preemptor's ClusterQueue and setting, and the victims.
type EvictionRight struct {
	// Queue is the preemptor's ClusterQueue; Setting the preemption
	// setting (withinClusterQueue, reclaimWithinCohort or
	// borrowWithinCohort) and Policy its value (LowerPriority, Any, ...).
	Queue   string `json:"queue"`
	Setting string `json:"setting"`
	Policy  string `json:"policy"`
	// By are the namespace's priorities that evict, top first.
	By []string `json:"by"`
	// Namespace and VictimQueue are the victims' namespace and ClusterQueue;
	// Priorities their priorities that can be evicted, top first.
	Namespace   string   `json:"namespace"`
	VictimQueue string   `json:"victimQueue"`
	Priorities  []string `json:"priorities"`
	// Possible is false when Kueue never takes the path; Never says why.
	// When says what the path needs besides a preemptor short of quota
	// ("" for withinClusterQueue).
	Possible bool   `json:"possible"`
	When     string `json:"when"`
	Never    string `json:"never"`
}

var settingOrder = []string{"withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"}

// access computes every GPU namespace's NamespaceAccess. It reads the
// findings (dead-preemption, preemption-rejected), so it runs after them.
func (e *explainer) access() []NamespaceAccess {
	p := e.p
	c := &pathFacts{dead: map[string]bool{}, frs: map[string][]FlavorResource{}, borrows: map[string]bool{}, neverBorrows: map[string]string{},
		rejected: map[string]bool{}, deadSettings: map[string]map[string]bool{}, reasons: map[reasonKey]string{}, prioValues: map[string][]int32{}}
	for _, f := range e.findings {
		if f.Rule == RuleDeadPreemption.ID || f.Rule == RulePreemptionRejected.ID {
			c.dead[f.Path] = true
		}
	}
	rights := p.AllowedEach()
	nss := p.GPUNamespaces()
	// users maps a ClusterQueue to the namespaces that may use it, sorted.
	users := map[string][]string{}
	for _, ns := range nss {
		for _, q := range rights[ns].Queues {
			users[q] = append(users[q], ns)
		}
	}
	out := make([]NamespaceAccess, 0, len(nss))
	type victim struct{ ns, queue string }
	// Scratch reused for every namespace: its paths are copied out at
	// their number.
	var victims []victim
	var evicts []EvictionRight
	for _, a := range nss {
		ra := rights[a]
		na := NamespaceAccess{
			Namespace: a, Priorities: nonNil(ra.Priorities), PrioritiesDefault: ra.PrioritiesDefault,
			Queues: nonNil(ra.Queues), LocalQueues: nonNil(ra.LocalQueues), QueuesDefault: ra.QueuesDefault,
		}
		evicts = evicts[:0]
		for _, q := range ra.Queues {
			for _, setting := range settingOrder {
				// The victims' queues: q itself, or the others of its cohort.
				victimQueues := []string{q}
				if setting != "withinClusterQueue" {
					victimQueues = e.cohortOf[q]
				}
				victims = victims[:0]
				for _, q2 := range victimQueues {
					for _, b := range users[q2] {
						if b != a {
							victims = append(victims, victim{b, q2})
						}
					}
				}
				// In the order of the victims' namespaces, then queues.
				slices.SortStableFunc(victims, func(x, y victim) int { return strings.Compare(x.ns, y.ns) })
				for _, v := range victims {
					if er, ok := e.evictionRight(q, setting, ra, rights[v.ns], v.queue, c); ok {
						evicts = append(evicts, er)
					}
				}
			}
		}
		na.Evicts = slices.Clone(evicts)
		if na.Evicts == nil {
			na.Evicts = []EvictionRight{}
		}
		out = append(out, na)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// evictionRight is the path from namespace ra's workloads in queue q,
// through setting, to namespace rb's in q2; false when the settings and
// priorities do not allow one at all.
func (e *explainer) evictionRight(q, setting string, ra, rb policy.Rights, q2 string, c *pathFacts) (EvictionRight, bool) {
	p := e.p
	cq := p.Queues[q]
	pre := cq.Preemption
	var pol string
	var rel func(by, v int32) bool
	switch setting {
	case "withinClusterQueue":
		if q2 != q || !policyEnabled(pre.WithinClusterQueue) {
			return EvictionRight{}, false
		}
		pol = pre.WithinClusterQueue
		rel = func(by, v int32) bool {
			return by > v || pol == "LowerOrNewerEqualPriority" && by == v
		}
	case "reclaimWithinCohort":
		if q2 == q || cq.Cohort == "" || p.CohortTree(q2) != p.CohortTree(q) || !policyEnabled(pre.ReclaimWithinCohort) {
			return EvictionRight{}, false
		}
		pol = pre.ReclaimWithinCohort
		rel = func(by, v int32) bool { return pol == "Any" || by > v }
	case "borrowWithinCohort":
		if q2 == q || cq.Cohort == "" || p.CohortTree(q2) != p.CohortTree(q) || !borrowWithinCohortEnabled(pre) {
			return EvictionRight{}, false
		}
		pol = pre.BorrowWithinCohort
		var threshold *int32
		if th, ok := p.Priorities[pre.MaxPriorityThreshold]; ok {
			threshold = &th.Value
		}
		rel = func(by, v int32) bool {
			return by > v && (threshold == nil || v <= *threshold)
		}
	}
	er := EvictionRight{Queue: q, Setting: setting, Policy: pol, Namespace: rb.Namespace, VictimQueue: q2, By: []string{}, Priorities: []string{}}
	av, bv := c.values(p, ra), c.values(p, rb)
	for i, by := range ra.Priorities {
		for j := range rb.Priorities {
			if rel(av[i], bv[j]) {
				er.By = append(er.By, by)
				break
			}
		}
	}
	for j, v := range rb.Priorities {
		for i := range ra.Priorities {
			if rel(av[i], bv[j]) {
				er.Priorities = append(er.Priorities, v)
				break
			}
		}
	}
	if len(er.By) == 0 {
		return EvictionRight{}, false
	}
	er.Never = e.neverEvicts(q, setting, q2, c)
	er.Possible = er.Never == ""
	if er.Possible && setting != "withinClusterQueue" {
		er.When = "while " + q2 + " is above its nominal quota"
		if setting == "borrowWithinCohort" {
			er.When += " and " + q + " borrows"
		}
	}
	return er, true
}

// pathFacts holds what neverEvicts reads, computed once per queue: the
// dead-preemption and preemption-rejected findings' paths, each queue's
// (flavor, resource) cells, whether it can ever borrow one, and why not.
type pathFacts struct {
	dead         map[string]bool
	frs          map[string][]FlavorResource
	borrows      map[string]bool
	neverBorrows map[string]string
	// rejected and deadSettings are dead's verdicts per queue: Kueue
	// rejects it; the settings explain's search never saw fire.
	rejected     map[string]bool
	deadSettings map[string]map[string]bool
	// reasons holds neverEvicts' reasons that depend on one or two
	// names only (said).
	reasons map[reasonKey]string
	// prioValues holds each namespace's Rights.Priorities' values
	// (values).
	prioValues map[string][]int32
}

// values is the WorkloadPriorityClass value of each of r.Priorities, in
// order (0 for a name the policy does not define), once per namespace.
func (c *pathFacts) values(p *policy.Policy, r policy.Rights) []int32 {
	if vs, ok := c.prioValues[r.Namespace]; ok {
		return vs
	}
	vs := make([]int32, len(r.Priorities))
	for i, n := range r.Priorities {
		vs[i] = p.Priorities[n].Value
	}
	c.prioValues[r.Namespace] = vs
	return vs
}

// reasonKey names one of neverEvicts' reasons: its kind and the names it
// depends on.
type reasonKey struct{ kind, a, b string }

func (e *explainer) cells(c *pathFacts, queue string) []FlavorResource {
	if out, ok := c.frs[queue]; ok {
		return out
	}
	var out []FlavorResource
	for _, card := range e.p.Queues[queue].FlavorNames() {
		for _, k := range policy.Kinds {
			out = append(out, FlavorResource{card, k})
		}
	}
	c.frs[queue] = out
	why := e.neverBorrowsWhy(e.empty, queue, out)
	c.borrows[queue], c.neverBorrows[queue] = why == "", why
	if len(c.dead) > 0 {
		c.rejected[queue] = c.dead[policy.PathString("queues", queue, "preemption")]
		c.deadSettings[queue] = map[string]bool{}
		for _, setting := range settingOrder {
			c.deadSettings[queue][setting] = c.dead[policy.PathString("queues", queue, "preemption", setting)]
		}
	}
	return out
}

// neverEvicts says why Kueue never takes the path, or "" when it can.
func (e *explainer) neverEvicts(q, setting, q2 string, c *pathFacts) string {
	victimCells := e.cells(c, q2)
	e.cells(c, q)
	if c.rejected[q] {
		return c.said(reasonKey{"rejected", q, ""}, func() string {
			return fmt.Sprintf("Kueue rejects ClusterQueue %s as written (finding preemption-rejected)", q)
		})
	}
	s := e.empty
	if setting != "withinClusterQueue" && !c.borrows[q2] {
		return c.said(reasonKey{"above", q2, ""}, func() string {
			return fmt.Sprintf("Kueue evicts in another ClusterQueue only while it is above its nominal quota (kubernetes-sigs/kueue#10171), and %s never is: %s", q2, c.neverBorrows[q2])
		})
	}
	switch setting {
	case "reclaimWithinCohort":
		owns := slices.ContainsFunc(victimCells, func(fr FlavorResource) bool {
			return s.Nominal(q, fr) > 0 && s.CanBorrow(q2, fr)
		})
		if !owns {
			return fmt.Sprintf("Kueue reclaims only for a workload that fits its own queue's nominal quota, and %s owns nothing %s can borrow", q, q2)
		}
	case "borrowWithinCohort":
		if !c.borrows[q] {
			return c.said(reasonKey{"borrow", q, ""}, func() string {
				return fmt.Sprintf("%s can never borrow: %s", q, c.neverBorrows[q])
			})
		}
	}
	if c.deadSettings[q][setting] {
		return c.said(reasonKey{"dead", q, setting}, func() string {
			return fmt.Sprintf("explain finds no situation in which Kueue fires %s's %s (finding dead-preemption)", q, setting)
		})
	}
	return ""
}

// said is the reason under key, made by say the first time: a queue's
// reason is the same for every namespace and victim it stands for.
func (c *pathFacts) said(key reasonKey, say func() string) string {
	if w, ok := c.reasons[key]; ok {
		return w
	}
	w := say()
	c.reasons[key] = w
	return w
}

// Words is the path in a sentence: "at training, can evict the
// on-demand-llm workloads of llm in gpu-large-model (gpu-general
// reclaimWithinCohort LowerPriority), while gpu-large-model is above its
// nominal quota".
func (er EvictionRight) Words() string { return wordsOf([]EvictionRight{er}) }

// wordsOf says paths that differ only in their setting in one sentence.
func wordsOf(ers []EvictionRight) string {
	er := ers[0]
	var settings []string
	for _, x := range ers {
		settings = append(settings, x.Setting+" "+x.Policy)
	}
	s := fmt.Sprintf("the %s workloads of %s in %s (%s %s)", andList(er.Priorities), er.Namespace, er.VictimQueue, er.Queue, andList(settings))
	if !er.Possible {
		return fmt.Sprintf("at %s, never evicts %s: %s", andList(er.By), s, er.Never)
	}
	if er.When != "" {
		s += ", " + er.When
	}
	return fmt.Sprintf("at %s, can evict %s", andList(er.By), s)
}

// evictionLines groups a namespace's paths that Kueue never takes for the
// same reason between the same namespaces and queues, and says each group.
func evictionLines(ers []EvictionRight) []string {
	var out []string
	for i := 0; i < len(ers); {
		j := i + 1
		for j < len(ers) && !ers[i].Possible && !ers[j].Possible && ers[j].Queue == ers[i].Queue && ers[j].Namespace == ers[i].Namespace &&
			ers[j].VictimQueue == ers[i].VictimQueue && ers[j].Never == ers[i].Never &&
			slices.Equal(ers[j].By, ers[i].By) && slices.Equal(ers[j].Priorities, ers[i].Priorities) {
			j++
		}
		out = append(out, wordsOf(ers[i:j]))
		i = j
	}
	return out
}

// rightsWords is "priorities training, on-demand-llm, batch (the default);
// LocalQueues gpu-general".
func (na NamespaceAccess) rightsWords() string {
	def := func(b bool) string {
		if b {
			return " (the default)"
		}
		return ""
	}
	return fmt.Sprintf("priorities %s%s; LocalQueues %s%s", orNothing(strings.Join(na.Priorities, ", "), "none"), def(na.PrioritiesDefault),
		orNothing(strings.Join(na.LocalQueues, ", "), "none"), def(na.QueuesDefault))
}

func andList(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// evictsAny reports whether any of the namespace's eviction paths is one
// Kueue takes.
func (na NamespaceAccess) evictsAny() bool {
	return slices.ContainsFunc(na.Evicts, func(er EvictionRight) bool { return er.Possible })
}

const accessTitle = "Who may evict whom (the policy's access rules, through each ClusterQueue's preemption)"

func (r *Report) writeAccessText(w io.Writer) {
	if len(r.Access) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", accessTitle)
	for _, na := range r.Access {
		fmt.Fprintf(w, "  %s: %s\n", na.Namespace, na.rightsWords())
		if !na.evictsAny() {
			fmt.Fprintf(w, "    evicts no other namespace's workloads\n")
		}
		for _, words := range evictionLines(na.Evicts) {
			writeHanging(w, words)
		}
	}
}

func (r *Report) writeAccessMarkdown(w io.Writer) {
	if len(r.Access) == 0 {
		return
	}
	fmt.Fprintf(w, "#### %s\n\n", accessTitle)
	for _, na := range r.Access {
		fmt.Fprintf(w, "- **%s**: %s", na.Namespace, na.rightsWords())
		if !na.evictsAny() {
			fmt.Fprintf(w, "; evicts no other namespace's workloads")
		}
		fmt.Fprintln(w)
		for _, words := range evictionLines(na.Evicts) {
			fmt.Fprintf(w, "  - %s\n", strings.ReplaceAll(words, "|", "\\|"))
		}
	}
}

// writeHanging writes a note wrapped at 86 columns, indented by four, its
// continuation lines by six.
func writeHanging(w io.Writer, note string) {
	for k, line := range wrap(note, 86) {
		if k == 0 {
			fmt.Fprintf(w, "    %s\n", line)
		} else {
			fmt.Fprintf(w, "      %s\n", line)
		}
	}
}
