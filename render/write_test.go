package render

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// readDir returns a directory's files and contents.
func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		// Drop the generated-file header gen adds.
		out[e.Name()] = strings.TrimPrefix(string(b), GeneratedPrefix+" (test)\n")
	}
	return out
}

func names(m map[string]string) string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// onlyDir fails unless parent holds exactly the one entry want (no temporary
// directories left).
func onlyDir(t *testing.T, parent, want string) {
	t.Helper()
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if len(got) != 1 || got[0] != want {
		t.Errorf("%s holds %v, want only %s", parent, got, want)
	}
}

var (
	oldRender = map[string][]byte{"a.yaml": gen("old a"), "stale.yaml": gen("old stale")}
	newRender = map[string][]byte{"a.yaml": gen("new a"), "b.yaml": gen("new b"), "c.yaml": gen("new c")}
)

func TestWriteCreatesAndReplaces(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "lab")
	if _, err := Write(dir, oldRender); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, dir); names(got) != "a.yaml,stale.yaml" || got["a.yaml"] != "old a\n" {
		t.Fatalf("first write: %v", got)
	}
	if _, err := Write(dir, newRender); err != nil {
		t.Fatal(err)
	}
	got := readDir(t, dir)
	if names(got) != "a.yaml,b.yaml,c.yaml" || got["a.yaml"] != "new a\n" || got["c.yaml"] != "new c\n" {
		t.Errorf("second write: %v (the stale file must go)", got)
	}
	info, err := os.Stat(dir)
	if err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("dir mode %v, %v", info.Mode(), err)
	}
	onlyDir(t, parent, "lab")
}

func TestWriteCreatesParents(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "lab")
	if _, err := Write(dir, newRender); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, dir); len(got) != 3 {
		t.Errorf("%v", got)
	}
}

// A render removes what a killed earlier render of the same directory left
// beside it (".lab.tmp-N", ".out.tmp-N" for a render into out), and nothing
// else.
func TestWriteRemovesStaleTemporaries(t *testing.T) {
	parent := t.TempDir()
	for _, p := range []string{".lab.tmp-123/a.yaml", ".lab.tmp-9/b.yaml", ".out.tmp-77/a.yaml"} {
		if err := os.MkdirAll(filepath.Join(parent, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(parent, p), gen("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	keep := []string{".lab.tmp-notmine", ".labs.tmp-1", "lab.tmp-1", ".other.tmp-1"}
	for _, k := range keep {
		if err := os.WriteFile(filepath.Join(parent, k), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Write(filepath.Join(parent, "lab"), newRender); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(filepath.Join(parent, "out"), newRender); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := append([]string{"lab", "out"}, keep...)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after the renders %s holds\n  %v\nwant\n  %v", parent, got, want)
	}
}

func gen(body string) []byte { return []byte(GeneratedPrefix + " (test)\n" + body + "\n") }

// A directory with a .yaml file gpupolicy did not generate (a hand-written
// Deployment) is never replaced.
func TestWriteRefusesHandWrittenYAML(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mine := []byte("apiVersion: apps/v1\nkind: Deployment\n")
	if err := os.WriteFile(filepath.Join(dir, "important.yaml"), mine, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Write(dir, newRender)
	if err == nil || !strings.Contains(err.Error(), "important.yaml, which gpupolicy did not generate") {
		t.Fatalf("Write = %v, want a refusal naming important.yaml", err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "important.yaml"))
	if string(got) != string(mine) {
		t.Fatal("important.yaml changed")
	}
}

// Write refuses a directory holding anything but rendered .yaml files —
// a subdirectory, a generated file not named .yaml, a .yaml file shorter
// than the header — naming it, and leaves the directory as it was.
func TestWriteRefusesWhatRenderDidNotWrite(t *testing.T) {
	for name, c := range map[string]struct {
		make func(dir string) error
		msg  string
	}{
		"subdirectory": {func(dir string) error { return os.Mkdir(filepath.Join(dir, "sub"), 0o755) },
			"holds sub, which is not a rendered .yaml file"},
		"not .yaml": {func(dir string) error { return os.WriteFile(filepath.Join(dir, "a.yml"), gen("x"), 0o644) },
			"holds a.yml, which is not a rendered .yaml file"},
		"short .yaml": {func(dir string) error { return os.WriteFile(filepath.Join(dir, "z.yaml"), []byte("# Code"), 0o644) },
			"holds z.yaml, which gpupolicy did not generate"},
	} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "lab")
			if _, err := Write(dir, oldRender); err != nil {
				t.Fatal(err)
			}
			if err := c.make(dir); err != nil {
				t.Fatal(err)
			}
			_, err := Write(dir, newRender)
			if err == nil || !strings.HasPrefix(err.Error(), "render: "+dir+" "+c.msg) || !strings.HasSuffix(err.Error(), "; refusing to replace the directory") {
				t.Fatalf("Write = %v, want a refusal: %s", err, c.msg)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "a.yaml")); err != nil || string(b) != string(oldRender["a.yaml"]) {
				t.Errorf("a refused render changed a.yaml: %q, %v", b, err)
			}
			onlyDir(t, parent, "lab")
		})
	}
}

// A re-render keeps the files that did not change (the same inode, linked
// from the previous render) and writes the others.
func TestWriteKeepsUnchangedFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	if _, err := Write(dir, newRender); err != nil {
		t.Fatal(err)
	}
	stat := func(name string) os.FileInfo {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	a, b := stat("a.yaml"), stat("b.yaml")
	next := map[string][]byte{"a.yaml": newRender["a.yaml"], "b.yaml": gen("new B")}
	if _, err := Write(dir, next); err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(a, stat("a.yaml")) {
		t.Error("the unchanged a.yaml was written again")
	}
	if os.SameFile(b, stat("b.yaml")) {
		t.Error("the changed b.yaml kept its inode")
	}
	if got := readDir(t, dir); names(got) != "a.yaml,b.yaml" || got["b.yaml"] != "new B\n" || got["a.yaml"] != "new a\n" {
		t.Errorf("after the re-render: %v", got)
	}
}
