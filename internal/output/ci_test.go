package output

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/finding"
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

// sarifDef is one object definition of the SARIF 2.1.0 JSON schema
// (sarif-schema-2.1.0.json, OASIS): its properties (additionalProperties
// is false for every one of them), the required ones, the definition of
// each property that is an object or an array of objects, and the enums.
type sarifDef struct {
	props    string            // space-separated
	required string            // space-separated
	anyOf    []string          // at least one of these must be present
	children map[string]string // property -> definition (object or array items)
	enums    map[string]string // property -> space-separated values
	minimum  map[string]float64
}

// sarifSchema transcribes the definitions a gpupolicy log uses from the
// official SARIF 2.1.0 schema. The schema itself is not vendored: no copy
// was reachable from this machine (not in the module cache, not in
// go-sarif's module); this checks the same constraints for these objects.
var sarifSchema = map[string]sarifDef{
	"sarifLog": {props: "$schema version runs inlineExternalProperties properties", required: "version runs",
		children: map[string]string{"runs": "run", "properties": "propertyBag"}, enums: map[string]string{"version": "2.1.0"}},
	"run": {props: "tool invocations conversion language versionControlProvenance originalUriBaseIds artifacts logicalLocations graphs results automationDetails runAggregates baselineGuid redactionTokens defaultEncoding defaultSourceLanguage newlineSequences columnKind externalPropertyFileReferences threadFlowLocations taxonomies addresses translations policies webRequests webResponses specialLocations properties",
		required: "tool", children: map[string]string{"tool": "tool", "results": "result", "automationDetails": "runAutomationDetails", "properties": "propertyBag"},
		enums: map[string]string{"columnKind": "utf16CodeUnits unicodeCodePoints"}},
	"tool": {props: "driver extensions properties", required: "driver", children: map[string]string{"driver": "toolComponent", "extensions": "toolComponent", "properties": "propertyBag"}},
	"toolComponent": {props: "guid name organization product productSuite shortDescription fullDescription fullName version semanticVersion dottedQuadFileVersion releaseDateUtc downloadUri informationUri globalMessageStrings notifications rules taxa locations language contents isComprehensive localizedDataSemanticVersion minimumRequiredLocalizedDataSemanticVersion associatedComponent translationMetadata supportedTaxonomies properties",
		required: "name", children: map[string]string{"rules": "reportingDescriptor", "shortDescription": "multiformatMessageString", "fullDescription": "multiformatMessageString", "properties": "propertyBag"}},
	"reportingDescriptor": {props: "id deprecatedIds guid deprecatedGuids name deprecatedNames shortDescription fullDescription messageStrings defaultConfiguration helpUri help relationships properties",
		required: "id", children: map[string]string{"shortDescription": "multiformatMessageString", "fullDescription": "multiformatMessageString", "help": "multiformatMessageString", "defaultConfiguration": "reportingConfiguration", "properties": "propertyBag"}},
	"multiformatMessageString": {props: "text markdown properties", required: "text"},
	"reportingConfiguration":   {props: "enabled level rank parameters properties", enums: map[string]string{"level": "none note warning error"}},
	"result": {props: "ruleId ruleIndex rule kind level message analysisTarget locations guid correlationGuid occurrenceCount partialFingerprints fingerprints stacks codeFlows graphs graphTraversals relatedLocations suppressions baselineState rank attachments hostedViewerUri workItemUris provenance fixes taxa webRequest webResponse properties",
		required: "message", children: map[string]string{"message": "message", "locations": "location", "properties": "propertyBag"},
		enums:   map[string]string{"level": "none note warning error", "kind": "notApplicable pass fail review open informational", "baselineState": "new unchanged updated absent"},
		minimum: map[string]float64{"ruleIndex": -1}},
	"message":  {props: "text markdown id arguments properties", anyOf: []string{"text", "id"}},
	"location": {props: "id physicalLocation logicalLocations message annotations relationships properties", children: map[string]string{"physicalLocation": "physicalLocation", "logicalLocations": "logicalLocation", "message": "message"}},
	"physicalLocation": {props: "address artifactLocation region contextRegion properties", anyOf: []string{"address", "artifactLocation"},
		children: map[string]string{"artifactLocation": "artifactLocation", "region": "region"}},
	"artifactLocation":     {props: "uri uriBaseId index description properties", minimum: map[string]float64{"index": -1}},
	"region":               {props: "startLine startColumn endLine endColumn charOffset charLength byteOffset byteLength snippet sourceLanguage message properties", minimum: map[string]float64{"startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 1}},
	"logicalLocation":      {props: "name index fullyQualifiedName decoratedName parentIndex kind properties"},
	"runAutomationDetails": {props: "description id guid correlationGuid properties"},
	"propertyBag":          {props: "*"},
}

func checkSARIF(t *testing.T, def, path string, v any) {
	t.Helper()
	d, ok := sarifSchema[def]
	if !ok {
		t.Fatalf("no definition %s", def)
	}
	if arr, ok := v.([]any); ok {
		for i, x := range arr {
			checkSARIF(t, def, fmt.Sprintf("%s[%d]", path, i), x)
		}
		return
	}
	obj, ok := v.(map[string]any)
	if !ok {
		t.Errorf("%s: %T, want an object (%s)", path, v, def)
		return
	}
	if d.props == "*" {
		if tags, ok := obj["tags"]; ok {
			seen := map[any]bool{}
			for _, x := range tags.([]any) {
				if _, ok := x.(string); !ok || seen[x] {
					t.Errorf("%s.tags: not unique strings: %v", path, tags)
				}
				seen[x] = true
			}
		}
		return
	}
	allowed := map[string]bool{}
	for _, p := range strings.Fields(d.props) {
		allowed[p] = true
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !allowed[k] {
			t.Errorf("%s: property %q is not allowed in %s", path, k, def)
		}
	}
	for _, r := range strings.Fields(d.required) {
		if _, ok := obj[r]; !ok {
			t.Errorf("%s: %s requires %q", path, def, r)
		}
	}
	if len(d.anyOf) > 0 {
		found := false
		for _, r := range d.anyOf {
			_, ok := obj[r]
			found = found || ok
		}
		if !found {
			t.Errorf("%s: %s needs one of %v", path, def, d.anyOf)
		}
	}
	for k, vals := range d.enums {
		if x, ok := obj[k]; ok && !strings.Contains(" "+vals+" ", " "+fmt.Sprint(x)+" ") {
			t.Errorf("%s.%s: %v is not one of %s", path, k, x, vals)
		}
	}
	for k, min := range d.minimum {
		if x, ok := obj[k]; ok {
			if n, ok := x.(float64); !ok || n < min || n != float64(int64(n)) {
				t.Errorf("%s.%s: %v, want an integer >= %v", path, k, x, min)
			}
		}
	}
	for k, child := range d.children {
		if x, ok := obj[k]; ok {
			checkSARIF(t, child, path+"."+k, x)
		}
	}
}

func TestSARIF(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSARIF(&b, testRun); err != nil {
		t.Fatal(err)
	}
	var log map[string]any
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	checkSARIF(t, "sarifLog", "$", log)
	if t.Failed() {
		t.Logf("%s", b.String())
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
	log = nil
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	checkSARIF(t, "sarifLog", "$", log)
	if !strings.Contains(b.String(), `"results": []`) {
		t.Errorf("an empty run has no results array (code scanning needs one):\n%s", b.String())
	}
}
