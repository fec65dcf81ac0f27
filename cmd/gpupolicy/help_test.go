package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// helpOf runs gpupolicy VERB --help and returns what it prints.
func helpOf(t *testing.T, verb string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run([]string{verb, "--help"}, &out, &errOut); code != exitClean {
		t.Fatalf("%s --help exit %d: %s", verb, code, errOut.String())
	}
	return out.String()
}

// TestHelpTeachesPolicyFeatures: render's help lists the Cohort objects it
// writes, explain's the exclusive section and the per-card split, and
// vet's points at the policy fields cohorts, flavorFungibility, anyCard
// and exclusive, each in the schema and at a README section that exists;
// the verbs that print CI formats keep their CI example.
func TestHelpTeachesPolicyFeatures(t *testing.T) {
	render := helpOf(t, "render")
	for _, s := range []string{"\n  Cohort ", "cohort_NAME.yaml", "flavorFungibility"} {
		if !strings.Contains(render, s) {
			t.Errorf("render --help lacks %q:\n%s", s, render)
		}
	}
	explain := helpOf(t, "explain")
	for _, s := range []string{`section "Exclusive templates"`, `"8 on a 4, b 4"`, "anyCard"} {
		if !strings.Contains(explain, s) {
			t.Errorf("explain --help lacks %q:\n%s", s, explain)
		}
	}

	schema, err := os.ReadFile(filepath.Join("..", "..", "schema", "policy.cue"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "#") {
			headings[strings.TrimSpace(strings.TrimLeft(l, "#"))] = true
		}
	}
	vet := helpOf(t, "vet")
	section := regexp.MustCompile(`\("([^"]+)"\)$`)
	for _, field := range []string{"cohorts", "flavorFungibility", "anyCard", "exclusive"} {
		line := ""
		for _, l := range strings.Split(vet, "\n") {
			if strings.HasPrefix(l, "  "+field+" ") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("vet --help has no line for policy field %s:\n%s", field, vet)
			continue
		}
		if !regexp.MustCompile(`(?m)^\s*` + field + `\??:`).Match(schema) {
			t.Errorf("vet --help names field %s, which schema/policy.cue does not declare", field)
		}
		m := section.FindStringSubmatch(line)
		if m == nil || !headings[m[1]] {
			t.Errorf("vet --help: %s points at no README heading: %q", field, line)
		}
	}

	for verb, ci := range map[string]string{
		"vet": "-o github", "explain": "-o github", "plan": "-o sarif", "drift": "-o sarif",
	} {
		if h := helpOf(t, verb); !strings.Contains(h, "CI") || !strings.Contains(h, "gpupolicy "+verb) || !strings.Contains(h, ci) {
			t.Errorf("%s --help lost its CI example (%s)", verb, ci)
		}
	}
}
