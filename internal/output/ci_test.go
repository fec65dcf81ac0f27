package output

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/output/sariftest"
)

// The rules and findings of a run like explain's on the lab: an error with
// a position, a warning and an info finding of another rule, a drift
// finding with an object and no position, and a rule that found nothing.
var (
	ruleDead  = finding.Rule{ID: "dead-preemption", Verb: finding.Explain, Severity: finding.Error, Reason: "a configured preemption path that can never fire"}
	ruleLock  = finding.Rule{ID: "lock-capacity", Verb: finding.Explain, Severity: finding.Warning, Also: []finding.Severity{finding.Info}, Reason: "a lock larger or smaller than what the quota admits"}
	ruleDrift = finding.Rule{ID: "pin-drift", Verb: finding.Drift, Severity: finding.Warning, Reason: "the cluster syncs the render at its pin"}
	ruleClean = finding.Rule{ID: "starvation", Verb: finding.Explain, Severity: finding.Warning, Reason: "a priority that no state admits"}

	testRun = Run{
		Tool: "gpupolicy", Version: "v0.0.0-test", Command: "explain",
		InformationURI: "https://github.com/gpupolicy/gpupolicy",
		Rules:          []finding.Rule{ruleDead, ruleLock, ruleClean},
		Findings: []finding.Finding{
			{Rule: "dead-preemption", Severity: finding.Error, Message: "a waking 7B never evicts batch jobs: \"borrowWithinCohort\" needs <nominal\n100%", Path: `queues."gpu-large-model".preemption.borrowWithinCohort`, Pos: "policies/lab/queues.cue:34:4"},
			{Rule: "lock-capacity", Severity: finding.Warning, Message: "main lock 4, quota admits 4", Path: "locks.main.size", Pos: "origin/main:policies/lab/locks.cue:12:16"},
			{Rule: "lock-capacity", Severity: finding.Info, Message: "cache lock 1", Path: "locks.cache.size", Pos: "policies/lab/locks.cue:6:16"},
			{Rule: "pin-drift", Severity: finding.Warning, Message: "WorkflowTemplate/ml/gpu-step spec: changed, a, b", Object: "WorkflowTemplate/ml/gpu-step"},
		},
	}
)

func TestParseLocation(t *testing.T) {
	cases := []struct {
		pos  string
		want Location
		ok   bool
	}{
		{"policies/lab/queues.cue:34:4", Location{"policies/lab/queues.cue", 34, 4}, true},
		{"HEAD:policies/lab/queues.cue:34:4", Location{"policies/lab/queues.cue", 34, 4}, true},
		{"./lab/x.cue:3:1", Location{"lab/x.cue", 3, 1}, true},
		{"lab/x.cue:7", Location{"lab/x.cue", 7, 0}, true},
		{"lab/x.cue", Location{"lab/x.cue", 0, 0}, true},
		{"", Location{}, false},
	}
	for _, c := range cases {
		got, ok := ParseLocation(c.pos)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseLocation(%q) = %+v, %v; want %+v, %v", c.pos, got, ok, c.want, c.ok)
		}
	}
}

func TestFormatsParse(t *testing.T) {
	fs := WithCI([]Format{Text, JSON})
	if List(fs) != "text, json, sarif, junit or github" {
		t.Errorf("WithCI: %s", List(fs))
	}
	for _, f := range CI {
		if got, err := Parse(string(f), fs...); err != nil || got != f || !IsCI(f) {
			t.Errorf("Parse(%s) = %v, %v", f, got, err)
		}
	}
	if IsCI(JSON) {
		t.Error("json is not a CI format")
	}
	if err := WriteFindings(&bytes.Buffer{}, JSON, testRun); err == nil {
		t.Error("WriteFindings(json) should refuse")
	}
}

func TestGitHub(t *testing.T) {
	var b bytes.Buffer
	if err := WriteGitHub(&b, testRun); err != nil {
		t.Fatal(err)
	}
	want := `::error file=policies/lab/queues.cue,line=34,col=4,title=dead-preemption::a waking 7B never evicts batch jobs: "borrowWithinCohort" needs <nominal%0A100%25
::warning file=policies/lab/locks.cue,line=12,col=16,title=lock-capacity::main lock 4, quota admits 4
::notice file=policies/lab/locks.cue,line=6,col=16,title=lock-capacity::cache lock 1
::warning title=pin-drift::WorkflowTemplate/ml/gpu-step spec: changed, a, b
`
	if b.String() != want {
		t.Errorf("annotations:\n%s\nwant:\n%s", b.String(), want)
	}
	if got := escapeProperty("a:b,c%d\ne"); got != "a%3Ab%2Cc%25d%0Ae" {
		t.Errorf("escapeProperty: %s", got)
	}
	b.Reset()
	if err := WriteGitHub(&b, Run{Tool: "gpupolicy"}); err != nil || b.Len() != 0 {
		t.Errorf("no findings: %q, %v", b.String(), err)
	}
}

func TestJUnit(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJUnit(&b, testRun); err != nil {
		t.Fatal(err)
	}
	// Read back as a JUnit reader does (the Ant schema's elements).
	type failure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
	type testcase struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		File      string   `xml:"file,attr"`
		Line      int      `xml:"line,attr"`
		Failure   *failure `xml:"failure"`
		SystemOut string   `xml:"system-out"`
	}
	type testsuite struct {
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Errors   int        `xml:"errors,attr"`
		Cases    []testcase `xml:"testcase"`
	}
	var doc struct {
		XMLName  xml.Name    `xml:"testsuites"`
		Tests    int         `xml:"tests,attr"`
		Failures int         `xml:"failures,attr"`
		Suites   []testsuite `xml:"testsuite"`
	}
	if !strings.HasPrefix(b.String(), `<?xml version="1.0" encoding="UTF-8"?>`) {
		t.Errorf("no XML declaration:\n%s", b.String())
	}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if len(doc.Suites) != 1 {
		t.Fatalf("%d test suites, want 1", len(doc.Suites))
	}
	s := doc.Suites[0]
	// dead-preemption: 1 case (failure); lock-capacity: 2 (a failure, an
	// info passing); starvation: 1 passing; pin-drift (not in Rules, added
	// from the finding): 1 failure.
	if s.Name != "gpupolicy explain" || s.Tests != 5 || len(s.Cases) != 5 || s.Failures != 3 || s.Errors != 0 ||
		doc.Tests != 5 || doc.Failures != 3 {
		t.Errorf("suite %q: tests %d (%d cases, %d in all), failures %d (%d in all), errors %d; want 5 tests, 3 failures\n%s",
			s.Name, s.Tests, len(s.Cases), doc.Tests, s.Failures, doc.Failures, s.Errors, b.String())
	}
	failures := 0
	for _, c := range s.Cases {
		if c.Failure != nil {
			failures++
		}
	}
	if failures != 3 {
		t.Errorf("%d failure elements, want 3", failures)
	}
	c := s.Cases[0]
	if c.Name != "dead-preemption policies/lab/queues.cue:34:4" || c.Classname != "gpupolicy.explain.dead-preemption" ||
		c.File != "policies/lab/queues.cue" || c.Line != 34 || c.Failure == nil || c.Failure.Type != "error" ||
		c.Failure.Message != testRun.Findings[0].Message ||
		!strings.Contains(c.Failure.Text, "policies/lab/queues.cue:34:4: dead-preemption: a waking 7B") {
		t.Errorf("first case: %+v", c)
	}
	if c := s.Cases[2]; c.Failure != nil || !strings.Contains(c.SystemOut, "cache lock 1") {
		t.Errorf("an info finding is a passing case with output: %+v", c)
	}
	if c := s.Cases[3]; c.Name != "starvation" || c.Classname != "gpupolicy.explain" || c.Failure != nil {
		t.Errorf("a clean rule is a passing case: %+v", c)
	}
	if c := s.Cases[4]; c.Name != "pin-drift WorkflowTemplate/ml/gpu-step" || c.Failure == nil || c.Failure.Type != "warning" {
		t.Errorf("a finding without a position: %+v", c)
	}
}

func TestSARIF(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSARIF(&b, testRun); err != nil {
		t.Fatal(err)
	}
	// The official SARIF 2.1.0 schema (sariftest vendors it).
	if err := sariftest.Validate(b.Bytes()); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}

	// What code scanning needs beyond the schema: one run; every result's
	// rule in the driver's rules at its ruleIndex; a relative URI and a
	// line for every result with a position.
	var doc struct {
		Version string `json:"version"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Name, Version string
					Rules         []struct {
						ID                   string `json:"id"`
						ShortDescription     struct{ Text string }
						Help                 struct{ Text string }
						DefaultConfiguration struct {
							Level string
						}
					}
				}
			}
			Results []struct {
				RuleID        string `json:"ruleId"`
				RuleIndex     int    `json:"ruleIndex"`
				Level         string
				Message       struct{ Text string }
				BaselineState string
				Locations     []struct {
					PhysicalLocation *struct {
						ArtifactLocation struct{ URI, URIBaseID string }
						Region           struct{ StartLine, StartColumn int }
					}
					LogicalLocations []struct{ FullyQualifiedName, Kind string }
				}
			}
		}
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != "2.1.0" || len(doc.Runs) != 1 {
		t.Fatalf("version %s, %d runs", doc.Version, len(doc.Runs))
	}
	run := doc.Runs[0]
	if run.Tool.Driver.Name != "gpupolicy" || run.Tool.Driver.Version != "v0.0.0-test" {
		t.Errorf("driver %+v", run.Tool.Driver)
	}
	var ids []string
	for _, r := range run.Tool.Driver.Rules {
		ids = append(ids, r.ID)
	}
	if got := strings.Join(ids, " "); got != "dead-preemption lock-capacity starvation pin-drift" {
		t.Errorf("rules %s: want one per rule checked, then the findings' others", got)
	}
	if r := run.Tool.Driver.Rules[0]; r.ShortDescription.Text != ruleDead.Reason || r.DefaultConfiguration.Level != "error" ||
		!strings.Contains(r.Help.Text, "gpupolicy explain --help") {
		t.Errorf("rule 0: %+v", r)
	}
	if len(run.Results) != len(testRun.Findings) {
		t.Fatalf("%d results, want %d", len(run.Results), len(testRun.Findings))
	}
	levels := []string{"error", "warning", "note", "warning"}
	for i, res := range run.Results {
		f := testRun.Findings[i]
		if res.RuleID != f.Rule || ids[res.RuleIndex] != f.Rule || res.Level != levels[i] || res.Message.Text != f.Message {
			t.Errorf("result %d: %+v for %+v", i, res, f)
		}
	}
	pl := run.Results[1].Locations[0].PhysicalLocation
	if pl == nil || pl.ArtifactLocation.URI != "policies/lab/locks.cue" || pl.ArtifactLocation.URIBaseID != "%SRCROOT%" ||
		pl.Region.StartLine != 12 || pl.Region.StartColumn != 16 {
		t.Errorf("result 1's location (from a REV:path position): %+v", pl)
	}
	if l := run.Results[3].Locations[0]; l.PhysicalLocation != nil || len(l.LogicalLocations) != 1 ||
		l.LogicalLocations[0].FullyQualifiedName != "WorkflowTemplate/ml/gpu-step" {
		t.Errorf("a drift finding's location: %+v", l)
	}

	// plan's baseline states; an empty run is still a valid log.
	withBaseline := testRun
	withBaseline.Baseline = []string{"new", "updated"}
	b.Reset()
	if err := WriteSARIF(&b, withBaseline); err != nil {
		t.Fatal(err)
	}
	if err := sariftest.Validate(b.Bytes()); err != nil {
		t.Errorf("with baseline states: %v", err)
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if r := doc.Runs[0].Results; r[0].BaselineState != "new" || r[1].BaselineState != "updated" || r[2].BaselineState != "" {
		t.Errorf("baseline states: %+v", r)
	}
	b.Reset()
	if err := WriteSARIF(&b, Run{Tool: "gpupolicy", Command: "vet"}); err != nil {
		t.Fatal(err)
	}
	if err := sariftest.Validate(b.Bytes()); err != nil {
		t.Errorf("an empty run: %v", err)
	}
	if !strings.Contains(b.String(), `"results": []`) {
		t.Errorf("an empty run has no results array (code scanning needs one):\n%s", b.String())
	}
}
