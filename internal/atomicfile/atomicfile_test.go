package atomicfile

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
		out[e.Name()] = string(b)
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

// only fails unless parent holds exactly want (no temporaries left).
func only(t *testing.T, parent string, want ...string) {
	t.Helper()
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s holds %v, want only %v", parent, got, want)
	}
}

func restoreHooks() {
	writeFile, rename, swap, exchangeDirs = writeFileSync, os.Rename, swapDirs, exchange
}

var (
	oldDir = map[string][]byte{"a.yaml": []byte("old a"), "stale.yaml": []byte("old stale")}
	newDir = map[string][]byte{"a.yaml": []byte("new a"), "b.yaml": []byte("new b"), "c.yaml": []byte("new c")}
)

func TestReplaceDirCreatesAndReplaces(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out", "lab")
	if err := ReplaceDir(dir, oldDir); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceDir(dir, newDir); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, dir); names(got) != "a.yaml,b.yaml,c.yaml" || got["a.yaml"] != "new a" {
		t.Errorf("second write: %v (the stale file must go)", got)
	}
	for p, want := range map[string]os.FileMode{dir: 0o755, filepath.Join(dir, "a.yaml"): 0o644} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", p, fi.Mode().Perm(), err, want)
		}
	}
	only(t, filepath.Join(parent, "out"), "lab")
}

func TestReplaceDirRefusesBadNames(t *testing.T) {
	parent := t.TempDir()
	for _, bad := range []string{"../x.yaml", "sub/x.yaml", "", "..", "."} {
		if err := ReplaceDir(filepath.Join(parent, "sub", "bad"), map[string][]byte{bad: nil}); err == nil {
			t.Errorf("file name %q accepted", bad)
		}
	}
	if err := os.WriteFile(filepath.Join(parent, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceDir(filepath.Join(parent, "file"), newDir); err == nil {
		t.Error("a file was replaced by a directory")
	}
	only(t, parent, "file")
}

// A write that fails part-way, at any step, leaves the previous directory
// exactly as it was and no temporary directory.
func TestReplaceDirFailureLeavesPrevious(t *testing.T) {
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
		"no exchange, moving the new directory in fails": func() {
			exchangeDirs = func(a, b string) error { return errNoExchange }
			swap = func(next, dir string) error {
				// Remove the new directory so that swapDirs's second
				// rename fails after the first moved the old one aside.
				if err := os.RemoveAll(next); err != nil {
					return err
				}
				return swapDirs(next, dir)
			}
		},
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			defer restoreHooks()
			parent := t.TempDir()
			dir := filepath.Join(parent, "lab")
			if err := ReplaceDir(dir, oldDir); err != nil {
				t.Fatal(err)
			}
			breakIt()
			if err := ReplaceDir(dir, newDir); err == nil {
				t.Fatal("the broken write succeeded")
			}
			got := readDir(t, dir)
			if names(got) != "a.yaml,stale.yaml" || got["a.yaml"] != "old a" || got["stale.yaml"] != "old stale" {
				t.Errorf("previous directory changed: %v", got)
			}
			only(t, parent, "lab")
		})
	}
}

func TestReplaceDirNewDirFailureLeavesNothing(t *testing.T) {
	defer restoreHooks()
	rename = func(from, to string) error { return errors.New("boom") }
	parent := t.TempDir()
	if err := ReplaceDir(filepath.Join(parent, "lab"), newDir); err == nil {
		t.Fatal("the broken write succeeded")
	}
	only(t, parent)
}

// Without an atomic exchange, ReplaceDir moves the old directory aside and
// the new one in.
func TestReplaceDirFallbackSwap(t *testing.T) {
	defer restoreHooks()
	exchangeDirs = func(a, b string) error { return errNoExchange }
	parent := t.TempDir()
	dir := filepath.Join(parent, "lab")
	if err := ReplaceDir(dir, oldDir); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceDir(dir, newDir); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, dir); names(got) != "a.yaml,b.yaml,c.yaml" {
		t.Errorf("%v", got)
	}
	only(t, parent, "lab")
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
		t.Skip("no atomic exchange on this platform or file system; ReplaceDir uses two renames")
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

// WriteFile creates a file with perm, replaces one keeping its mode, and
// on failure leaves the previous content and no temporary.
func TestWriteFile(t *testing.T) {
	defer restoreHooks()
	parent := t.TempDir()
	p := filepath.Join(parent, "environment.yaml")
	if err := WriteFile(p, []byte("one\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("new file: %v, %v", fi, err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two\n" {
		t.Errorf("content %q", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the file's own 0600", fi.Mode().Perm())
	}
	rename = func(from, to string) error { return errors.New("boom") }
	if err := WriteFile(p, []byte("three\n"), 0o644); err == nil {
		t.Fatal("the broken write succeeded")
	}
	if b, _ := os.ReadFile(p); string(b) != "two\n" {
		t.Errorf("a failed write changed the file: %q", b)
	}
	only(t, parent, "environment.yaml")
}

// RemoveStale removes exactly the temporaries of its own path: numbered
// ".NAME.tmp-", and ".NAME.old-" only while NAME exists (otherwise it is
// the only copy of the previous content).
func TestRemoveStale(t *testing.T) {
	parent := t.TempDir()
	mk := func(names ...string) {
		for _, n := range names {
			p := filepath.Join(parent, n)
			if strings.HasSuffix(n, "/") {
				if err := os.MkdirAll(filepath.Join(p, "sub"), 0o755); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	keep := []string{".lab.tmp-x", ".lab.tmp-", ".lab.tmp-1.bak", ".lab2.tmp-1", "lab.tmp-1", ".out.tmp-4", ".lab.old-8/"}
	mk(append([]string{".lab.tmp-1", ".lab.tmp-22/"}, keep...)...)
	if err := RemoveStale(filepath.Join(parent, "lab")); err != nil {
		t.Fatal(err)
	}
	for i, k := range keep {
		keep[i] = strings.TrimSuffix(k, "/")
	}
	only(t, parent, keep...)

	// Once lab exists, its .old- directory is a leftover too.
	mk("lab/")
	if err := RemoveStale(filepath.Join(parent, "lab")); err != nil {
		t.Fatal(err)
	}
	only(t, parent, ".lab.tmp-x", ".lab.tmp-", ".lab.tmp-1.bak", ".lab2.tmp-1", "lab.tmp-1", ".out.tmp-4", "lab")

	// A directory that does not exist has nothing stale.
	if err := RemoveStale(filepath.Join(parent, "nowhere", "lab")); err != nil {
		t.Error(err)
	}
}

// WriteFile and ReplaceDir clear their own leftovers first.
func TestWritesRemoveStale(t *testing.T) {
	parent := t.TempDir()
	for _, n := range []string{".report.md.tmp-5", ".lab.tmp-6"} {
		if err := os.WriteFile(filepath.Join(parent, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFile(filepath.Join(parent, "report.md"), []byte("r"), 0o644); err != nil {
		t.Fatal(err)
	}
	only(t, parent, ".lab.tmp-6", "report.md")
	if err := ReplaceDir(filepath.Join(parent, "lab"), newDir); err != nil {
		t.Fatal(err)
	}
	only(t, parent, "lab", "report.md")
}
