// Package finding is the one home of a finding — what a rule found, how
// bad it is and where — and of the registry of every rule the verbs apply
// (vet's, render's, explain's, drift's and verify's).
//
// A rule is declared once, next to the code that checks it, with Register:
//
//	var RuleLockOrder = finding.Register(finding.Rule{
//		ID: "lock-order", Verb: finding.Vet, Severity: finding.Error,
//		Reason: "a template takes its locks in the policy's acquisition order",
//	})
//
// and reported with RuleLockOrder.New(message) (or Newf), which fills in the
// rule's ID and default severity; the caller adds the policy path and the
// position.
package finding

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Severity says how bad a finding is. Any error makes a report verb exit 1
// (vet: 2, a policy that does not vet is an input error).
type Severity string

// The severities, most severe first.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
	Info    Severity = "info"
)

// Severities lists every severity, most severe first.
var Severities = []Severity{Error, Warning, Info}

// Rank orders severities: 0 for error, 1 warning, 2 info (3 for anything
// else).
func (s Severity) Rank() int {
	for i, x := range Severities {
		if s == x {
			return i
		}
	}
	return len(Severities)
}

// Valid reports whether s is one of Severities.
func (s Severity) Valid() bool { return s.Rank() < len(Severities) }

// Finding is one result of a rule. Its JSON keys are the contract README.md
// documents for explain -o json ("Findings"): keys are only ever added, never
// renamed or removed.
type Finding struct {
	// Rule is the registered rule's stable ID.
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	// Message says what and why, in the lab's words, with the numbers.
	Message string `json:"message"`
	// Path is the policy field the finding is about, as CUE prints a path:
	// queues."gpu-large-model".preemption.borrowWithinCohort; empty when it
	// is about no one field (drift's and verify's findings are about the
	// cluster).
	Path string `json:"path"`
	// Pos is file:line:col of that field (relative to the current
	// directory, or REV:path:line:col for a policy read from git); empty
	// when unknown.
	Pos string `json:"pos,omitempty"`
	// Object is what outside the policy the finding is about: a Kubernetes
	// object as Kind/namespace/name (drift), or a test job's Workflow
	// (verify); empty otherwise.
	Object string `json:"object,omitempty"`
}

// String is "pos: rule: message" (vet's line), or "rule: message" without a
// position. A finding that is not an error says its severity before the
// message, "pos: rule: warning: message", keeping the "pos: rule:" prefix
// that editors and scripts match.
func (f Finding) String() string {
	msg := f.Message
	if f.Severity != "" && f.Severity != Error {
		msg = string(f.Severity) + ": " + msg
	}
	if f.Pos == "" {
		return fmt.Sprintf("%s: %s", f.Rule, msg)
	}
	return fmt.Sprintf("%s: %s: %s", f.Pos, f.Rule, msg)
}

// List is a list of findings. As an error it is a policy that does not vet
// or render (an input error, exit 2), one line per finding.
type List []Finding

func (l List) Error() string {
	lines := make([]string, len(l))
	for i, f := range l {
		lines[i] = f.String()
	}
	return strings.Join(lines, "\n")
}

// Sort orders findings for a report: severity (error first), then rule,
// path, position, object and message.
func (l List) Sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if a.Severity.Rank() != b.Severity.Rank() {
			return a.Severity.Rank() < b.Severity.Rank()
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Pos != b.Pos {
			return PosLess(a.Pos, b.Pos)
		}
		if a.Object != b.Object {
			return a.Object < b.Object
		}
		return a.Message < b.Message
	})
}

// SortByPos orders findings as a compiler does: by position (file, then
// line and column numerically), then message.
func (l List) SortByPos() {
	sort.SliceStable(l, func(i, j int) bool {
		if l[i].Pos != l[j].Pos {
			return PosLess(l[i].Pos, l[j].Pos)
		}
		return l[i].Message < l[j].Message
	})
}

// HasErrors reports whether any finding has error severity.
func (l List) HasErrors() bool { return l.Count(Error) > 0 }

// Count returns the number of findings of a severity.
func (l List) Count(s Severity) int {
	n := 0
	for _, f := range l {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// PosLess orders "file:line:col" by file, then numerically by line and
// column.
func PosLess(a, b string) bool {
	fa, la, ca := splitPos(a)
	fb, lb, cb := splitPos(b)
	if fa != fb {
		return fa < fb
	}
	if la != lb {
		return la < lb
	}
	return ca < cb
}

func splitPos(p string) (file string, line, col int) {
	parts := strings.Split(p, ":")
	if len(parts) < 3 {
		return p, 0, 0
	}
	l, errL := strconv.Atoi(parts[len(parts)-2])
	c, errC := strconv.Atoi(parts[len(parts)-1])
	if errL != nil || errC != nil {
		return p, 0, 0
	}
	return strings.Join(parts[:len(parts)-2], ":"), l, c
}
