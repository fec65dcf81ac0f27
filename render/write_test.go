package render

import (
	"errors"
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
	if err := Write(dir, oldRender); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, dir); names(got) != "a.yaml,stale.yaml" || got["a.yaml"] != "old a\n" {
		t.Fatalf("first write: %v", got)
	}
	if err := Write(dir, newRender); err != nil {
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
	if err := Write(dir, newRender); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, dir); len(got) != 3 {
		t.Errorf("%v", got)
	}
}

// A write that fails part-way, at any step, leaves the previous render
// exactly as it was and no temporary directory.
func TestWriteFailureLeavesPreviousRender(t *testing.T) {
	boom := errors.New("disk full")
	cases := map[string]func(){
		"third file fails": func() {
			n := 0
			writeFile = func(path string, b []byte) error {
				n++
				if n == 3 {
					return boom
				}
				return writeFileSync(path, b)
			}
		},
		"swap fails": func() {
			swap = func(next, dir string) error { return boom }
		},
		"no exchange, moving the new render in fails": func() {
			exchangeDirs = func(a, b string) error { return errNoExchange }
			swap = func(next, dir string) error {
				// Remove the new render so that swapDirs's second rename
				// fails after the first moved the old one aside.
				if err := os.RemoveAll(next); err != nil {
					return err
				}
				return swapDirs(next, dir)
			}
		},
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				writeFile, rename, swap, exchangeDirs = writeFileSync, os.Rename, swapDirs, exchange
			}()
			parent := t.TempDir()
			dir := filepath.Join(parent, "lab")
			if err := Write(dir, oldRender); err != nil {
				t.Fatal(err)
			}
			breakIt()
			err := Write(dir, newRender)
			if err == nil {
				t.Fatal("the broken write succeeded")
			}
			got := readDir(t, dir)
			if names(got) != "a.yaml,stale.yaml" || got["a.yaml"] != "old a\n" || got["stale.yaml"] != "old stale\n" {
				t.Errorf("previous render changed: %v", got)
			}
			onlyDir(t, parent, "lab")
		})
	}
}

func TestWriteNewDirFailureLeavesNothing(t *testing.T) {
	defer func() { rename = os.Rename }()
	rename = func(from, to string) error { return errors.New("boom") }
	parent := t.TempDir()
	if err := Write(filepath.Join(parent, "lab"), newRender); err == nil {
		t.Fatal("the broken write succeeded")
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("left %v", entries)
	}
}

// Without an atomic exchange, Write moves the old render aside and the new
// one in.
func TestWriteFallbackSwap(t *testing.T) {
	defer func() { exchangeDirs = exchange }()
	exchangeDirs = func(a, b string) error { return errNoExchange }
	parent := t.TempDir()
	dir := filepath.Join(parent, "lab")
	if err := Write(dir, oldRender); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, newRender); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, dir); names(got) != "a.yaml,b.yaml,c.yaml" {
		t.Errorf("%v", got)
	}
	onlyDir(t, parent, "lab")
}

func TestWriteRefusesWhatIsNotARender(t *testing.T) {
	parent := t.TempDir()
	cases := map[string]func(dir string) error{
		"a source file": func(dir string) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"), 0o644)
		},
		"a subdirectory": func(dir string) error {
			return os.MkdirAll(filepath.Join(dir, ".git"), 0o755)
		},
		"a file, not a directory": func(dir string) error {
			return os.WriteFile(dir, []byte("x"), 0o644)
		},
	}
	i := 0
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			i++
			dir := filepath.Join(parent, "d"+string(rune('0'+i)))
			if err := setup(dir); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadDir(dir)
			if err := Write(dir, newRender); err == nil {
				t.Fatal("Write replaced it")
			}
			after, _ := os.ReadDir(dir)
			if len(before) != len(after) {
				t.Errorf("contents changed")
			}
		})
	}
	for _, bad := range []string{"../x.yaml", "sub/x.yaml", "", ".."} {
		if err := Write(filepath.Join(parent, "bad"), map[string][]byte{bad: nil}); err == nil {
			t.Errorf("file name %q accepted", bad)
		}
	}
	if _, err := os.Stat(filepath.Join(parent, "bad")); !os.IsNotExist(err) {
		t.Errorf("a refused write created the directory")
	}
}

func TestExchange(t *testing.T) {
	parent := t.TempDir()
	a, b := filepath.Join(parent, "a"), filepath.Join(parent, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, filepath.Base(d)+".yaml"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := exchange(a, b)
	if errors.Is(err, errNoExchange) {
		t.Skip("no atomic exchange on this platform or file system; Write uses two renames")
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a, "b.yaml")); err != nil {
		t.Error("a does not hold b's content")
	}
	if _, err := os.Stat(filepath.Join(b, "a.yaml")); err != nil {
		t.Error("b does not hold a's content")
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
	err := Write(dir, newRender)
	if err == nil || !strings.Contains(err.Error(), "important.yaml, which gpupolicy did not generate") {
		t.Fatalf("Write = %v, want a refusal naming important.yaml", err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "important.yaml"))
	if string(got) != string(mine) {
		t.Fatal("important.yaml changed")
	}
}
