package finding

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// The verbs that apply rules, in the order help and README list them.
const (
	Vet     = "vet"
	Render  = "render"
	Explain = "explain"
	Drift   = "drift"
	Verify  = "verify"
)

// Verbs lists the verbs that apply rules, in listing order.
var Verbs = []string{Vet, Render, Explain, Drift, Verify}

// Rule is one rule: a stable ID (reports, tests and suppressions name it),
// the verb that applies it, its default severity and a one-line reason in
// the lab's words.
type Rule struct {
	ID string
	// Verb is the verb that reports it: Vet, Render, Explain, Drift or
	// Verify.
	Verb string
	// Severity is what the rule reports by default; Also lists the other
	// severities it reports in some cases (starvation: error when no state
	// admits the job at all).
	Severity Severity
	Also     []Severity
	Reason   string
}

// Severities is the default severity and then Also, as "warning|error".
func (r Rule) Severities() string {
	s := []string{string(r.Severity)}
	for _, a := range r.Also {
		s = append(s, string(a))
	}
	return strings.Join(s, "|")
}

// New is a finding of the rule at its default severity; the caller sets
// Path, Pos and Object.
func (r Rule) New(message string) Finding {
	return Finding{Rule: r.ID, Severity: r.Severity, Message: message}
}

// Newf is New with a formatted message.
func (r Rule) Newf(format string, args ...any) Finding {
	return r.New(fmt.Sprintf(format, args...))
}

var (
	mu       sync.Mutex
	registry = map[string]Rule{}
	idRE     = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
)

// Register adds a rule to the registry and returns it, for a package-level
// variable next to the code that checks it. It panics (at init) on an ID
// that is not lower-case-with-dashes or is already registered, an unknown
// verb or severity, or an empty reason.
func Register(r Rule) Rule {
	if !idRE.MatchString(r.ID) {
		panic(fmt.Sprintf("finding: rule ID %q: use lower-case words joined by dashes", r.ID))
	}
	if !knownVerb(r.Verb) {
		panic(fmt.Sprintf("finding: rule %s: unknown verb %q (one of %s)", r.ID, r.Verb, strings.Join(Verbs, ", ")))
	}
	for _, s := range append([]Severity{r.Severity}, r.Also...) {
		if !s.Valid() {
			panic(fmt.Sprintf("finding: rule %s: unknown severity %q", r.ID, s))
		}
	}
	if strings.TrimSpace(r.Reason) == "" {
		panic(fmt.Sprintf("finding: rule %s has no reason", r.ID))
	}
	mu.Lock()
	defer mu.Unlock()
	if old, ok := registry[r.ID]; ok {
		panic(fmt.Sprintf("finding: rule %s registered twice (%s and %s)", r.ID, old.Verb, r.Verb))
	}
	registry[r.ID] = r
	return r
}

func knownVerb(v string) bool {
	for _, x := range Verbs {
		if v == x {
			return true
		}
	}
	return false
}

// Lookup returns the registered rule with an ID.
func Lookup(id string) (Rule, bool) {
	mu.Lock()
	defer mu.Unlock()
	r, ok := registry[id]
	return r, ok
}

// Rules returns every registered rule of the given verbs (all verbs when
// none is given), in Verbs order, then by ID. A rule is registered when the
// package declaring it is linked in: the gpupolicy binary links them all.
func Rules(verbs ...string) []Rule {
	if len(verbs) == 0 {
		verbs = Verbs
	}
	mu.Lock()
	defer mu.Unlock()
	var out []Rule
	for _, v := range verbs {
		var rs []Rule
		for _, r := range registry {
			if r.Verb == v {
				rs = append(rs, r)
			}
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i].ID < rs[j].ID })
		out = append(out, rs...)
	}
	return out
}

// Help lists rules for a command's --help: one line each, ID, severities
// and reason.
func Help(rules []Rule) string {
	idW, sevW := 0, 0
	for _, r := range rules {
		idW = max(idW, len(r.ID))
		sevW = max(sevW, len(r.Severities()))
	}
	lines := make([]string, len(rules))
	for i, r := range rules {
		lines[i] = fmt.Sprintf("  %-*s  %-*s  %s", idW, r.ID, sevW, r.Severities(), r.Reason)
	}
	return strings.Join(lines, "\n")
}

// MarkdownTable is the rules as README.md's table: rule, verb, severity,
// reason.
func MarkdownTable(rules []Rule) string {
	var b strings.Builder
	b.WriteString("| rule | verb | severity | reason |\n| --- | --- | --- | --- |\n")
	for _, r := range rules {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.ID, r.Verb,
			strings.ReplaceAll(r.Severities(), "|", ", "), strings.ReplaceAll(r.Reason, "|", `\|`))
	}
	return b.String()
}
