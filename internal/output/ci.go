package output

import (
	"encoding/xml"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/owenrumney/go-sarif/v2/sarif"

	"github.com/gpupolicy/gpupolicy/internal/finding"
)

// The CI formats, written from a verb's findings (WriteFindings) rather
// than from its report: sarif for code scanning (SARIF 2.1.0), junit for
// test reporters, github for GitHub Actions' workflow-command annotations.
const (
	SARIF  Format = "sarif"
	JUnit  Format = "junit"
	GitHub Format = "github"
)

// CI lists the CI formats.
var CI = []Format{SARIF, JUnit, GitHub}

// WithCI is a verb's report formats followed by the CI formats (a new
// slice: the verb's list is not changed).
func WithCI(report []Format) []Format {
	out := make([]Format, 0, len(report)+len(CI))
	return append(append(out, report...), CI...)
}

// IsCI reports whether f is a CI format, one WriteFindings writes.
func IsCI(f Format) bool {
	for _, c := range CI {
		if f == c {
			return true
		}
	}
	return false
}

// Run is what one verb checked and found, for the CI formats.
type Run struct {
	// Tool and Version name the tool ("gpupolicy", its version); Command
	// is the verb ("vet", "explain", "plan", "drift").
	Tool, Version, Command string
	// InformationURI is the tool's home page, for SARIF (optional).
	InformationURI string
	// Rules are the rules the verb checked: JUnit has a test case per rule,
	// SARIF a reportingDescriptor per rule (any rule a finding names is
	// added from the registry).
	Rules []finding.Rule
	// Findings are what the rules found: a SARIF result, a JUnit failure
	// (a test case whose output says it, for severity info) and a GitHub
	// annotation each.
	Findings []finding.Finding
	// Baseline, when set, is parallel to Findings: SARIF's baselineState of
	// each ("new", "updated", "unchanged", "absent"); plan sets it.
	Baseline []string
}

// WriteFindings writes a run in a CI format.
func WriteFindings(w io.Writer, f Format, run Run) error {
	switch f {
	case SARIF:
		return WriteSARIF(w, run)
	case JUnit:
		return WriteJUnit(w, run)
	case GitHub:
		return WriteGitHub(w, run)
	}
	return &ErrUnknown{Got: string(f), Accepted: CI}
}

// Location is a finding's position split for the CI formats: the file as a
// relative, slash-separated URI, and its line and column (0 when unknown).
// A position read from git (REV:path:line:col) loses its revision.
type Location struct {
	File      string
	Line, Col int
}

// ParseLocation splits a finding's Pos; ok is false when it has none.
func ParseLocation(pos string) (loc Location, ok bool) {
	if pos == "" {
		return Location{}, false
	}
	parts := strings.Split(pos, ":")
	file := pos
	if n := len(parts); n >= 3 {
		l, errL := strconv.Atoi(parts[n-2])
		c, errC := strconv.Atoi(parts[n-1])
		if errL == nil && errC == nil {
			loc.Line, loc.Col = l, c
			parts = parts[:n-2]
		}
	} else if n == 2 {
		if l, err := strconv.Atoi(parts[1]); err == nil {
			loc.Line = l
			parts = parts[:1]
		}
	}
	// REV:path: the file is the last part (paths here never hold a colon).
	file = parts[len(parts)-1]
	loc.File = strings.TrimPrefix(filepath.ToSlash(file), "./")
	return loc, loc.File != ""
}

// rules is the run's rules, then any rule a finding names that the run
// does not list (from the registry, or a bare one).
func (run Run) rules() []finding.Rule {
	out := append([]finding.Rule(nil), run.Rules...)
	seen := map[string]bool{}
	for _, r := range out {
		seen[r.ID] = true
	}
	for _, f := range run.Findings {
		if seen[f.Rule] {
			continue
		}
		seen[f.Rule] = true
		r, ok := finding.Lookup(f.Rule)
		if !ok {
			r = finding.Rule{ID: f.Rule, Verb: run.Command, Severity: f.Severity, Reason: f.Rule}
		}
		out = append(out, r)
	}
	return out
}

// levels maps a severity to SARIF's result level and GitHub's workflow
// command: error, warning, and note/notice for info.
var levels = map[finding.Severity][2]string{
	finding.Error:   {"error", "error"},
	finding.Warning: {"warning", "warning"},
	finding.Info:    {"note", "notice"},
}

func sarifLevel(s finding.Severity) string {
	if l, ok := levels[s]; ok {
		return l[0]
	}
	return "note"
}

func githubCommand(s finding.Severity) string {
	if l, ok := levels[s]; ok {
		return l[1]
	}
	return "notice"
}

// WriteSARIF writes the run as a SARIF 2.1.0 log with one run: the rules
// as the driver's reportingDescriptors (reason as the short description,
// the verb and severities as help), a result per finding at its policy
// file:line:col (a relative URI against %SRCROOT%), the object it is about
// as a logical location.
func WriteSARIF(w io.Writer, run Run) error {
	log, err := sarif.New(sarif.Version210)
	if err != nil {
		return err
	}
	driver := &sarif.ToolComponent{Name: run.Tool, Rules: []*sarif.ReportingDescriptor{}}
	if run.Version != "" {
		driver.Version = &run.Version
	}
	if run.InformationURI != "" {
		driver.InformationURI = &run.InformationURI
	}
	sr := sarif.NewRun(*sarif.NewTool(driver))
	sr.Results = []*sarif.Result{}
	if run.Command != "" {
		sr.AutomationDetails = &sarif.RunAutomationDetails{ID: ptr(run.Tool + "/" + run.Command + "/")}
	}
	index := map[string]int{}
	for i, r := range run.rules() {
		index[r.ID] = i
		help := fmt.Sprintf("%s\n\nReported by `%s %s`, severity %s. Run `%s %s --help` for every rule it applies.",
			r.Reason, run.Tool, r.Verb, strings.ReplaceAll(r.Severities(), "|", " or "), run.Tool, r.Verb)
		d := sarif.NewRule(r.ID).
			WithShortDescription(sarif.NewMultiformatMessageString(r.Reason)).
			WithFullDescription(sarif.NewMultiformatMessageString(r.Reason)).
			WithHelp(sarif.NewMultiformatMessageString(help).WithMarkdown(help)).
			WithDefaultConfiguration(&sarif.ReportingConfiguration{Level: sarifLevel(r.Severity)}).
			WithProperties(sarif.Properties{"verb": r.Verb, "tags": []string{run.Tool, r.Verb}})
		if run.InformationURI != "" {
			d.WithHelpURI(run.InformationURI + "#rules")
		}
		driver.Rules = append(driver.Rules, d)
	}
	for i, f := range run.Findings {
		res := sarif.NewRuleResult(f.Rule).
			WithRuleIndex(index[f.Rule]).
			WithLevel(sarifLevel(f.Severity)).
			WithMessage(sarif.NewTextMessage(f.Message))
		loc := sarif.NewLocation()
		if l, ok := ParseLocation(f.Pos); ok {
			region := sarif.NewRegion()
			if l.Line > 0 {
				region.WithStartLine(l.Line)
				if l.Col > 0 {
					region.WithStartColumn(l.Col)
				}
			}
			pl := sarif.NewPhysicalLocation().
				WithArtifactLocation(sarif.NewSimpleArtifactLocation(l.File).WithUriBaseId("%SRCROOT%"))
			if l.Line > 0 {
				pl.WithRegion(region)
			}
			loc.WithPhysicalLocation(pl)
		}
		if f.Object != "" {
			loc.AddLogicalLocations(sarif.NewLogicalLocation().WithFullyQualifiedName(f.Object).WithKind("object"))
		} else if f.Path != "" {
			loc.AddLogicalLocations(sarif.NewLogicalLocation().WithFullyQualifiedName(f.Path).WithKind("member"))
		}
		if loc.PhysicalLocation != nil || len(loc.LogicalLocations) > 0 {
			res.AddLocation(loc)
		}
		if i < len(run.Baseline) && run.Baseline[i] != "" {
			res.WithBaselineState(run.Baseline[i])
		}
		sr.AddResult(res)
	}
	log.AddRun(sr)
	return WriteJSON(w, log)
}

func ptr[T any](v T) *T { return &v }

// The JUnit document: what Jenkins, GitLab, CircleCI and the common
// test-report actions read (the Ant JUnit schema's elements and
// attributes).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Line      int           `xml:"line,attr,omitempty"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

type junitText struct {
	Text string `xml:",cdata"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// WriteJUnit writes the run as a JUnit XML report: one test suite (the
// verb), a passing test case per rule checked that found nothing, and a
// test case per finding, named by its rule and position: a failure for an
// error or a warning (type says which), passing with the message as its
// output for an info finding.
func WriteJUnit(w io.Writer, run Run) error {
	name := strings.TrimSpace(run.Tool + " " + run.Command)
	class := run.Tool
	if run.Command != "" {
		class += "." + run.Command
	}
	suite := junitSuite{Name: name, Time: "0", Cases: []junitCase{}}
	byRule := map[string][]finding.Finding{}
	for _, f := range run.Findings {
		byRule[f.Rule] = append(byRule[f.Rule], f)
	}
	for _, r := range run.rules() {
		fs := byRule[r.ID]
		if len(fs) == 0 {
			suite.Cases = append(suite.Cases, junitCase{Name: r.ID, Classname: class, Time: "0"})
			continue
		}
		for _, f := range fs {
			c := junitCase{Name: r.ID, Classname: class + "." + r.ID, Time: "0"}
			where := f.Pos
			if where == "" {
				where = f.Object
			}
			if where != "" {
				c.Name += " " + where
			}
			if l, ok := ParseLocation(f.Pos); ok {
				c.File, c.Line = l.File, l.Line
			}
			text := f.String()
			if f.Path != "" {
				text += "\nfield: " + f.Path
			}
			if f.Object != "" {
				text += "\nobject: " + f.Object
			}
			text += "\nrule: " + r.Reason
			if f.Severity == finding.Info {
				c.SystemOut = &junitText{text}
			} else {
				c.Failure = &junitFailure{Message: f.Message, Type: string(f.Severity), Text: text}
				suite.Failures++
			}
			suite.Cases = append(suite.Cases, c)
		}
	}
	suite.Tests = len(suite.Cases)
	doc := junitSuites{Name: name, Tests: suite.Tests, Failures: suite.Failures, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteGitHub writes one GitHub Actions workflow command per finding,
// which the runner shows as an annotation on the policy line:
//
//	::error file=policies/lab/queues.cue,line=34,col=4,title=dead-preemption::message
//
// (notice for severity info; a finding with no position has no file).
func WriteGitHub(w io.Writer, run Run) error {
	for _, f := range run.Findings {
		var props []string
		if l, ok := ParseLocation(f.Pos); ok {
			props = append(props, "file="+escapeProperty(l.File))
			if l.Line > 0 {
				props = append(props, "line="+strconv.Itoa(l.Line))
				if l.Col > 0 {
					props = append(props, "col="+strconv.Itoa(l.Col))
				}
			}
		}
		props = append(props, "title="+escapeProperty(f.Rule))
		if _, err := fmt.Fprintf(w, "::%s %s::%s\n", githubCommand(f.Severity), strings.Join(props, ","), escapeData(f.Message)); err != nil {
			return err
		}
	}
	return nil
}

// escapeData escapes a workflow command's message as the runner unescapes
// it (actions/toolkit's escapeData).
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// escapeProperty escapes a workflow command's property value
// (actions/toolkit's escapeProperty).
func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
