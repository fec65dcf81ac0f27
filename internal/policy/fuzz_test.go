package policy_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render"
)

// FuzzPolicy feeds the lab policy with one file replaced (or one added)
// through everything vet, render and explain do, and checks what must hold
// for any input:
//
//   - nothing panics;
//   - a policy that does not load is a finding.List, never another error,
//     and every finding has a position file:line:col in the policy's own
//     files (never in the embedded schema), on one line;
//   - the findings are the same on a second load (deterministic);
//   - a policy that loads and passes render's checks renders, and explains.
//
// Seeds: every file of policies/lab, and every .cue file of the vet and
// explain scenarios in cmd/gpupolicy/testdata/script, each in the place its
// scenario copies it to. go test runs the seeds; make fuzz runs the fuzzer.
func FuzzPolicy(f *testing.F) {
	lab := labFiles(f)
	names := sortedNames(lab)
	index := func(name string) uint8 {
		for i, n := range names {
			if n == name {
				return uint8(i)
			}
		}
		return uint8(len(names)) // an extra file
	}
	for i, n := range names {
		f.Add(uint8(i), lab[n])
	}
	scripts, _ := filepath.Glob("../../cmd/gpupolicy/testdata/script/*.txtar")
	cpRE := regexp.MustCompile(`(?m)^cp (\S+\.cue) \S+/(\S+\.cue)\s*$`)
	for _, s := range scripts {
		if b := filepath.Base(s); !strings.HasPrefix(b, "vet_") && !strings.HasPrefix(b, "explain_") {
			continue
		}
		a, err := txtar.ParseFile(s)
		if err != nil {
			f.Fatal(err)
		}
		dest := map[string]string{}
		for _, m := range cpRE.FindAllStringSubmatch(string(a.Comment), -1) {
			dest[m[1]] = m[2]
		}
		for _, file := range a.Files {
			if !strings.HasSuffix(file.Name, ".cue") {
				continue
			}
			to := dest[file.Name]
			if to == "" {
				to = file.Name
			}
			f.Add(index(to), file.Data)
		}
	}
	posRE := regexp.MustCompile(`^fuzz/[^/:]+\.cue:[0-9]+:[0-9]+$`)
	f.Fuzz(func(t *testing.T, which uint8, content []byte) {
		files := map[string][]byte{}
		for n, b := range lab {
			files[n] = b
		}
		name := "zz_fuzz.cue"
		if int(which) < len(names) {
			name = names[which]
		}
		files[name] = content
		display := func(n string) string { return "fuzz/" + n }

		p, err := policy.LoadFiles(files, display)
		// LoadFiles' fast path answers what its checked path does.
		checked, cerr := policy.LoadFilesChecked(files, display)
		switch {
		case (err == nil) != (cerr == nil) || err != nil && err.Error() != cerr.Error():
			t.Fatalf("LoadFiles and its checked path differ:\n%v\n--- and ---\n%v", err, cerr)
		case err == nil:
			if d := policy.SameLoad(p, checked); d != "" {
				t.Fatalf("LoadFiles and its checked path differ: %s", d)
			}
		}
		if err != nil {
			var ds finding.List
			if !errors.As(err, &ds) {
				t.Fatalf("not a finding: %v", err)
			}
			checkFindings(t, ds, posRE)
			_, err2 := policy.LoadFiles(files, display)
			if err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("findings differ between two loads:\n%v\n--- and ---\n%v", err, err2)
			}
			return
		}
		ds, err := render.Check(p)
		if err != nil {
			t.Fatalf("render.Check: %v", err)
		}
		if len(ds) > 0 {
			checkFindings(t, ds, posRE)
			return
		}
		if _, err := render.Render(p); err != nil {
			t.Fatalf("the policy vets but does not render: %v", err)
		}
		if _, err := admission.Explain(p); err != nil {
			t.Fatalf("the policy vets but does not explain: %v", err)
		}
	})
}

func checkFindings(t *testing.T, ds finding.List, posRE *regexp.Regexp) {
	t.Helper()
	if len(ds) == 0 {
		t.Fatal("an empty finding.List as an error")
	}
	for _, d := range ds {
		if !posRE.MatchString(d.Pos) {
			t.Errorf("finding without a position in the policy's files: %s", d)
		}
		if d.Rule == "" {
			t.Errorf("finding without a rule: %s", d)
		}
		if strings.ContainsAny(d.Message, "\n\r") {
			t.Errorf("finding on more than one line: %q", d.String())
		}
	}
}

func labFiles(f testing.TB) map[string][]byte {
	entries, err := os.ReadDir("../../policies/lab")
	if err != nil {
		f.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".cue") {
			b, err := os.ReadFile(filepath.Join("../../policies/lab", e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			out[e.Name()] = b
		}
	}
	return out
}

func sortedNames(m map[string][]byte) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
