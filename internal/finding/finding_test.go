package finding

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The JSON keys are README's contract (explain -o json, "Findings"): rule,
// severity, message and path always; pos and object when known.
func TestFindingJSONShape(t *testing.T) {
	full := Finding{Rule: "dead-preemption", Severity: Error, Message: "m", Path: "queues.q", Pos: "a.cue:1:2", Object: "ClusterQueue/q"}
	keys := func(f Finding) []string {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, k := range []string{"rule", "severity", "message", "path", "pos", "object"} {
			if _, ok := m[k]; ok {
				out = append(out, k)
			}
		}
		if len(out) != len(m) {
			t.Errorf("unexpected keys in %s", b)
		}
		return out
	}
	if got, want := keys(full), []string{"rule", "severity", "message", "path", "pos", "object"}; !reflect.DeepEqual(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	if got, want := keys(Finding{Rule: "x", Severity: Info}), []string{"rule", "severity", "message", "path"}; !reflect.DeepEqual(got, want) {
		t.Errorf("keys of a bare finding %v, want %v (path is always present)", got, want)
	}
	b, _ := json.Marshal(full)
	if want := `{"rule":"dead-preemption","severity":"error","message":"m","path":"queues.q","pos":"a.cue:1:2","object":"ClusterQueue/q"}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
}

func TestString(t *testing.T) {
	f := Finding{Rule: "schema", Message: "no .cue files"}
	if got := f.String(); got != "schema: no .cue files" {
		t.Errorf("String() = %q", got)
	}
	f.Pos = "lab/a.cue:3:4"
	if got := f.String(); got != "lab/a.cue:3:4: schema: no .cue files" {
		t.Errorf("String() = %q", got)
	}
	l := List{f, {Rule: "r", Message: "m"}}
	if got := l.Error(); got != "lab/a.cue:3:4: schema: no .cue files\nr: m" {
		t.Errorf("Error() = %q", got)
	}
	// A warning says so after its rule; an error does not.
	w := Finding{Rule: "card-any-flavor", Severity: Warning, Message: "m", Pos: "lab/a.cue:5:6"}
	if got := w.String(); got != "lab/a.cue:5:6: card-any-flavor: warning: m" {
		t.Errorf("warning String() = %q", got)
	}
	w.Severity, w.Pos = Error, ""
	if got := w.String(); got != "card-any-flavor: m" {
		t.Errorf("error String() = %q", got)
	}
}

func TestSort(t *testing.T) {
	l := List{
		{Rule: "b", Severity: Info, Path: "p"},
		{Rule: "b", Severity: Error, Path: "q"},
		{Rule: "a", Severity: Warning, Path: "p"},
		{Rule: "a", Severity: Error, Path: "z"},
		{Rule: "b", Severity: Error, Path: "p", Message: "2"},
		{Rule: "b", Severity: Error, Path: "p", Message: "1"},
	}
	l.Sort()
	var got []string
	for _, f := range l {
		got = append(got, string(f.Severity)+" "+f.Rule+" "+f.Path+" "+f.Message)
	}
	want := []string{"error a z ", "error b p 1", "error b p 2", "error b q ", "warning a p ", "info b p "}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Sort: %q, want %q", got, want)
	}
	if l.Count(Error) != 4 || !l.HasErrors() || (List{{Severity: Info}}).HasErrors() {
		t.Error("Count/HasErrors")
	}
}

func TestSortByPos(t *testing.T) {
	l := List{
		{Pos: "b.cue:1:1"}, {Pos: "a.cue:10:1"}, {Pos: "a.cue:9:12"}, {Pos: "a.cue:9:2"}, {Pos: ""},
		{Pos: "REV:p/a.cue:2:1"},
	}
	l.SortByPos()
	var got []string
	for _, f := range l {
		got = append(got, f.Pos)
	}
	want := []string{"", "REV:p/a.cue:2:1", "a.cue:9:2", "a.cue:9:12", "a.cue:10:1", "b.cue:1:1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SortByPos: %q, want %q", got, want)
	}
}

func TestRegisterRejects(t *testing.T) {
	bad := map[string]Rule{
		"empty ID":         {Verb: Vet, Severity: Error, Reason: "r"},
		"upper-case ID":    {ID: "Bad-ID", Verb: Vet, Severity: Error, Reason: "r"},
		"unknown verb":     {ID: "ok-id", Verb: "lint", Severity: Error, Reason: "r"},
		"unknown severity": {ID: "ok-id", Verb: Vet, Severity: "fatal", Reason: "r"},
		"bad also":         {ID: "ok-id", Verb: Vet, Severity: Error, Also: []Severity{"x"}, Reason: "r"},
		"no reason":        {ID: "ok-id", Verb: Vet, Severity: Error},
	}
	for name, r := range bad {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%+v) did not panic", r)
				}
			}()
			Register(r)
		})
	}
	if _, ok := Lookup("ok-id"); ok {
		t.Error("a rejected rule was registered")
	}
}

func TestRuleHelpers(t *testing.T) {
	r := Rule{ID: "starvation", Verb: Explain, Severity: Warning, Also: []Severity{Error}, Reason: "a | b"}
	if r.Severities() != "warning|error" {
		t.Errorf("Severities() = %q", r.Severities())
	}
	f := r.Newf("%d jobs", 4)
	if f.Rule != "starvation" || f.Severity != Warning || f.Message != "4 jobs" {
		t.Errorf("Newf: %+v", f)
	}
	if got := MarkdownTable([]Rule{r}); !strings.Contains(got, "| `starvation` | explain | warning, error | a \\| b |") {
		t.Errorf("MarkdownTable:\n%s", got)
	}
	if got := Help([]Rule{r, {ID: "x", Severity: Error, Reason: "y"}}); got != "  starvation  warning|error  a | b\n  x           error          y" {
		t.Errorf("Help:\n%s", got)
	}
	for i, s := range Severities {
		if s.Rank() != i || !s.Valid() {
			t.Errorf("%s: rank %d", s, s.Rank())
		}
	}
	if Severity("x").Valid() {
		t.Error("x is not a severity")
	}
}
