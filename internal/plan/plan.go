// Package plan says what a change to a policy does, for a pull request:
// the policy at two revisions is read straight from git objects (no
// checkout, the working tree untouched), rendered, and compared twice —
// object by object and field by field (package drift), and by what it does
// to admission (package admission): how many jobs of each template and
// priority run at once in each service state, what binds them, and which
// findings the change adds or clears.
package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render"
)

// Sides are the words for the two revisions in consequences.
var Sides = drift.Sides{From: "the base", To: "the head"}

// Options configure a plan.
type Options struct {
	Repo *gitrepo.Repo
	// Base and Head are revisions; Head defaults to HEAD.
	Base, Head string
	// PolicyDir is the policy's directory relative to the repository root.
	PolicyDir string
}

// Revision is one side of the plan.
type Revision struct {
	Commit gitrepo.Commit `json:"commit"`
	// Missing says why the side has no policy (it does not exist there, or
	// does not load); empty when it loaded.
	Missing string `json:"missing,omitempty"`
}

// Report is what a change does.
type Report struct {
	// PolicyDir is the policy's directory; Policy its name at the head.
	PolicyDir string   `json:"policyDir"`
	Policy    string   `json:"policy"`
	Base      Revision `json:"base"`
	Head      Revision `json:"head"`
	// Locks lists the locks whose size the change moves: a number edited,
	// or a lock sized from quota that a quota change moves.
	Locks []LockChange `json:"locks"`
	// Admission lists the capacity rows whose outcome the change changes.
	Admission []CapacityChange `json:"admission"`
	// Access lists the namespaces whose access rules (the priorities and
	// LocalQueues they may use) or whose paths to evict other namespaces'
	// workloads the change changes.
	Access []AccessChange `json:"access"`
	// FindingsAdded are the head's findings the base did not have;
	// FindingsCleared the base's findings the head no longer has;
	// FindingsChanged the head's findings whose rule, field and severity
	// the base had with another message (a number in it changed).
	FindingsAdded   []finding.Finding `json:"findingsAdded"`
	FindingsCleared []finding.Finding `json:"findingsCleared"`
	FindingsChanged []finding.Finding `json:"findingsChanged"`
	// FindingsChangedFrom holds, at the same index, the base's version of
	// each entry of FindingsChanged.
	FindingsChangedFrom []finding.Finding `json:"findingsChangedFrom"`
	// Render is every difference between the two renders.
	Render []drift.Difference `json:"render"`
}

// Changed reports whether the change changes the render at all.
func (r *Report) Changed() bool { return len(r.Render) > 0 }

// NewErrors counts the error findings the change adds.
func (r *Report) NewErrors() int {
	n := 0
	for _, f := range r.FindingsAdded {
		if f.Severity == finding.Error {
			n++
		}
	}
	return n
}

// Outcome is one capacity row's result on one side.
type Outcome struct {
	// Admitted is how many jobs run at once; QuotaAdmits how many Kueue
	// alone would admit.
	Admitted    int64 `json:"admitted"`
	QuotaAdmits int64 `json:"quotaAdmits"`
	// Bound says what stops the next job: "quota: nvidia.com/gpu, memory",
	// "lock main (4)", "never fits: ...".
	Bound string `json:"bound"`
	// Preempting is how many run once preemption has made room (0: none).
	Preempting int64 `json:"preempting,omitempty"`
}

// CapacityChange is one template × priority × service state whose outcome
// differs; Base or Head is nil when the row exists on one side only (a new
// template or priority).
type CapacityChange struct {
	Template string   `json:"template"`
	Priority string   `json:"priority"`
	State    string   `json:"state"`
	Base     *Outcome `json:"base"`
	Head     *Outcome `json:"head"`
}

// Describe is "batch jobs at once through gpu-step-no-cache, qwen2-5-7b
// down: 1 → 4".
func (c CapacityChange) Describe() string {
	return fmt.Sprintf("%s jobs at once through %s, %s: %s → %s", c.Priority, c.Template, c.State, jobs(c.Base), jobs(c.Head))
}

// LockChange is one lock whose size differs between the base and the
// head; Base or Head is nil where the lock does not exist.
type LockChange struct {
	Lock string    `json:"lock"`
	Base *LockSide `json:"base"`
	Head *LockSide `json:"head"`
}

// LockSide is a lock's size on one side and, for a lock sized from quota,
// how it got it (admission.LockSize.Words; "" for a number).
type LockSide struct {
	Size      int64  `json:"size"`
	FromQuota string `json:"fromQuota,omitempty"`
}

// Describe is "lock main: 4 → 5, sized from quota at the head (lock main:
// 5 = jobs of gpu-step (...) ClusterQueue gpu-general admits at once
// ...)", "lock cache: 1 → none (removed at the head)".
func (c LockChange) Describe() string {
	size := func(s *LockSide) string {
		if s == nil {
			return "none"
		}
		return fmt.Sprint(s.Size)
	}
	out := fmt.Sprintf("lock %s: %s → %s", c.Lock, size(c.Base), size(c.Head))
	switch {
	case c.Base == nil:
		out += " (new at the head)"
	case c.Head == nil:
		out += " (removed at the head)"
	}
	switch {
	case c.Head != nil && c.Head.FromQuota != "":
		out += ", sized from quota at the head (" + c.Head.FromQuota + ")"
	case c.Base != nil && c.Base.FromQuota != "":
		out += ", sized from quota at the base (" + c.Base.FromQuota + ")"
	}
	return out
}

// side is one revision loaded and analysed.
type side struct {
	rev    Revision
	policy *policy.Policy
	set    drift.Set
	report *admission.Report
	// locks are the policy's locks, sized.
	locks map[string]*LockSide
}

// Plan compares the policy at opts.Base with the policy at opts.Head. A
// head policy that does not load is an error (its diagnostics, with
// positions "a1b2c3d:policies/lab/x.cue:3:4"); a base that does not load,
// or has no such policy, is compared as empty.
func Plan(opts Options) (*Report, error) {
	if opts.Head == "" {
		opts.Head = "HEAD"
	}
	if opts.PolicyDir == "" {
		return nil, fmt.Errorf("plan: no policy directory")
	}
	base, err := opts.Repo.Resolve(opts.Base)
	if err != nil {
		return nil, fmt.Errorf("--base: %w", err)
	}
	head, err := opts.Repo.Resolve(opts.Head)
	if err != nil {
		return nil, fmt.Errorf("--head: %w", err)
	}
	h, err := load(opts.Repo, head, opts.PolicyDir)
	if err != nil {
		return nil, err
	}
	if h.rev.Missing != "" {
		return nil, fmt.Errorf("the head %s has no policy %s", head.Short(), opts.PolicyDir)
	}
	b, err := load(opts.Repo, base, opts.PolicyDir)
	if err != nil {
		b = &side{rev: Revision{Commit: base, Missing: "it does not load: " + firstLine(err.Error())}, set: drift.Set{}, report: &admission.Report{}}
	}
	r := &Report{
		PolicyDir: opts.PolicyDir,
		Policy:    h.policy.Name,
		Base:      b.rev,
		Head:      h.rev,
		Render:    drift.Compare(b.set, h.set),
	}
	drift.Explain(r.Render, b.set, h.set, Sides)
	r.Locks = compareLocks(b.locks, h.locks)
	r.Admission = compareCapacity(b.report, h.report, baseTemplates(b.policy), baseTemplates(h.policy))
	r.Access = compareAccess(b.report.Access, h.report.Access)
	r.FindingsAdded, r.FindingsCleared, r.FindingsChanged, r.FindingsChangedFrom = compareFindings(b.report.Findings, h.report.Findings)
	return r, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// load reads, vets, renders and analyses the policy at a commit.
func load(repo *gitrepo.Repo, c gitrepo.Commit, dir string) (*side, error) {
	s := &side{rev: Revision{Commit: c}, set: drift.Set{}, report: &admission.Report{}}
	if _, ok, err := repo.Files(c.Hash, dir); err != nil {
		return nil, err
	} else if !ok {
		s.rev.Missing = "no " + dir + " there"
		return s, nil
	}
	p, err := environment.PolicyAt(repo, c.Hash, dir)
	if err != nil {
		return nil, err
	}
	// Locks sized from quota: their sizes, and how each got it.
	p, sizes, err := admission.SizeLocks(p)
	if err != nil {
		return nil, err
	}
	s.locks = map[string]*LockSide{}
	for n, l := range p.Locks {
		s.locks[n] = &LockSide{Size: l.Size}
	}
	for _, ls := range sizes {
		s.locks[ls.Lock].FromQuota = ls.Words
	}
	res, err := render.Render(p)
	if err != nil {
		return nil, err
	}
	set, err := drift.Parse(res.Files)
	if err != nil {
		return nil, err
	}
	rep, err := admission.Explain(p)
	if err != nil {
		return nil, err
	}
	s.policy, s.set, s.report = p, set, rep
	return s, nil
}

// compareLocks lists the locks whose size differs, by name.
func compareLocks(base, head map[string]*LockSide) []LockChange {
	names := map[string]bool{}
	for n := range base {
		names[n] = true
	}
	for n := range head {
		names[n] = true
	}
	var out []LockChange
	for _, n := range slices.Sorted(maps.Keys(names)) {
		b, h := base[n], head[n]
		if b != nil && h != nil && b.Size == h.Size {
			continue
		}
		out = append(out, LockChange{Lock: n, Base: b, Head: h})
	}
	return out
}

type rowKey struct{ template, priority, state string }

func outcome(c admission.Capacity) *Outcome {
	o := &Outcome{Admitted: c.Admitted, QuotaAdmits: c.QuotaAdmits}
	switch {
	case c.BoundBy == "never-fits":
		o.Bound = "never fits: " + strings.Join(c.Binding, ", ")
	case c.BoundBy == "lock" && c.Lock != nil:
		o.Bound = fmt.Sprintf("lock %s (%d)", c.Lock.Name, c.Lock.Size)
	case len(c.Binding) > 0:
		o.Bound = "quota: " + strings.Join(c.Binding, ", ")
	default:
		o.Bound = c.BoundBy
	}
	if c.Preemption != nil {
		o.Preempting = c.Preemption.Admitted
	}
	return o
}

// baseTemplates maps each template variant of p to the template it comes
// from (nil for no policy).
func baseTemplates(p *policy.Policy) map[string]string {
	if p == nil {
		return nil
	}
	m := map[string]string{}
	for _, v := range p.Variants() {
		m[v.Name] = v.Template.Name
	}
	return m
}

// compareCapacity matches rows by template, priority and service state and
// keeps those whose outcome differs. A variant without rows of its own on
// one side (a cache-free variant that takes its template's locks shares
// its template's rows) is compared with its template's row there.
func compareCapacity(base, head *admission.Report, baseOf, headOf map[string]string) []CapacityChange {
	index := func(r *admission.Report) (map[rowKey]*Outcome, []rowKey) {
		m := map[rowKey]*Outcome{}
		var order []rowKey
		for _, c := range r.Capacity {
			k := rowKey{c.Template, c.Priority, policy.StateLabel(c.State)}
			if _, dup := m[k]; !dup {
				order = append(order, k)
			}
			m[k] = outcome(c)
		}
		return m, order
	}
	bm, border := index(base)
	hm, horder := index(head)
	var out []CapacityChange
	seen := map[rowKey]bool{}
	for _, k := range append(horder, border...) {
		if seen[k] {
			continue
		}
		seen[k] = true
		b, h := bm[k], hm[k]
		if t := baseOf[k.template]; b == nil && t != "" && t != k.template {
			b = bm[rowKey{t, k.priority, k.state}]
		}
		if t := headOf[k.template]; h == nil && t != "" && t != k.template {
			h = hm[rowKey{t, k.priority, k.state}]
		}
		if b != nil && h != nil && *b == *h {
			continue
		}
		out = append(out, CapacityChange{Template: k.template, Priority: k.priority, State: k.state, Base: b, Head: h})
	}
	return out
}

// compareFindings sorts the findings into those only the head has, those
// only the base has, and the head's that the base had (same rule, field and
// severity) with another message.
func compareFindings(base, head []finding.Finding) (added, cleared, changed, changedFrom []finding.Finding) {
	full := func(f finding.Finding) string {
		return f.Rule + "\x00" + f.Path + "\x00" + string(f.Severity) + "\x00" + f.Message
	}
	short := func(f finding.Finding) string { return f.Rule + "\x00" + f.Path + "\x00" + string(f.Severity) }
	count := func(fs []finding.Finding, key func(finding.Finding) string) map[string]int {
		m := map[string]int{}
		for _, f := range fs {
			m[key(f)]++
		}
		return m
	}
	bFull, hFull := count(base, full), count(head, full)
	// What differs, by message.
	var bOnly, hOnly []finding.Finding
	for _, f := range head {
		if bFull[full(f)] == 0 {
			hOnly = append(hOnly, f)
		}
	}
	for _, f := range base {
		if hFull[full(f)] == 0 {
			bOnly = append(bOnly, f)
		}
	}
	// A finding at the same rule, field and severity on both sides, once
	// each, changed its message.
	bShort, hShort := count(bOnly, short), count(hOnly, short)
	for _, f := range hOnly {
		if bShort[short(f)] == 1 && hShort[short(f)] == 1 {
			changed = append(changed, f)
			for _, b := range bOnly {
				if short(b) == short(f) {
					changedFrom = append(changedFrom, b)
				}
			}
		} else {
			added = append(added, f)
		}
	}
	for _, f := range bOnly {
		if !(bShort[short(f)] == 1 && hShort[short(f)] == 1) {
			cleared = append(cleared, f)
		}
	}
	return added, cleared, changed, changedFrom
}
