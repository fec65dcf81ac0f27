package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
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
	writeFile, syncWritten, rename, swap, exchangeDirs = writeNew, syncDirFiles, os.Rename, swapDirs, exchange
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
			writeFile = func(d *dirHandle, name string, b []byte) error {
				n++
				if n == 3 {
					return boom
				}
				return writeNew(d, name, b)
			}
		},
		"the sync fails": func() {
			syncWritten = func(d *os.File, names []string) error { return boom }
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

// ReplaceDir syncs once, after the last file is written and before the new
// directory is swapped in: the sync sees every file, dir still the previous
// content.
func TestReplaceDirSyncsOnceBeforeSwap(t *testing.T) {
	defer restoreHooks()
	parent := t.TempDir()
	dir := filepath.Join(parent, "lab")
	if err := ReplaceDir(dir, oldDir); err != nil {
		t.Fatal(err)
	}
	calls := 0
	syncWritten = func(d *os.File, synced []string) error {
		calls++
		if got := readDir(t, d.Name()); names(got) != "a.yaml,b.yaml,c.yaml" || got["c.yaml"] != "new c" {
			t.Errorf("at the sync, the new directory holds %v", got)
		}
		if got := readDir(t, dir); names(got) != "a.yaml,stale.yaml" {
			t.Errorf("at the sync, dir already holds %v", got)
		}
		if strings.Join(synced, ",") != "a.yaml,b.yaml,c.yaml" {
			t.Errorf("sync of %v", synced)
		}
		return syncDirFiles(d, synced)
	}
	if err := ReplaceDir(dir, newDir); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("%d syncs, want 1", calls)
	}
}

// The fallback sync (no syncfs) fsyncs each named file and fails on one it
// cannot open.
func TestFsyncFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := fsyncFiles(d, []string{"a.yaml"}); err != nil {
		t.Error(err)
	}
	if err := fsyncFiles(d, []string{"a.yaml", "missing.yaml"}); err == nil {
		t.Error("a missing file synced")
	}
}

// BenchmarkReplaceDir replaces a render-sized directory (2,000 files of
// 1 KiB): every file changed, synced once (syncfs, what ReplaceDir does)
// and synced file by file (an fsync each, what it did before); and a
// re-render with nothing changed (every file linked, not written).
func BenchmarkReplaceDir(b *testing.B) {
	render := func(i int) map[string][]byte {
		files := map[string][]byte{}
		for f := range 2000 {
			files[fmt.Sprintf("clusterqueue_q%04d.yaml", f)] = append(bytes.Repeat([]byte("x"), 1020), fmt.Sprintf("%04d", i%10000)...)
		}
		return files
	}
	for _, bc := range []struct {
		name    string
		sync    func(*os.File, []string) error
		changed bool
	}{{"changed/syncfs", syncDirFiles, true}, {"changed/fsync-per-file", fsyncFiles, true}, {"unchanged/syncfs", syncDirFiles, false}} {
		b.Run(bc.name, func(b *testing.B) {
			defer restoreHooks()
			syncWritten = bc.sync
			dir := filepath.Join(b.TempDir(), "lab")
			renders := [2]map[string][]byte{render(0), render(1)}
			if err := ReplaceDir(dir, renders[0]); err != nil {
				b.Fatal(err)
			}
			i := 1
			before := processCPU()
			for b.Loop() {
				files := renders[0]
				if bc.changed {
					files = renders[i%2]
				}
				if err := ReplaceDir(dir, files); err != nil {
					b.Fatal(err)
				}
				i++
			}
			// The process's own CPU time (user + system); the kernel's
			// write-back threads' is not in it.
			cpu := processCPU() - before
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// A file whose content the previous directory holds is linked, not
// written: the same inode, unless its mode is not 0644 or something else
// links to it (then a change through that link would reach the render).
func TestReplaceDirLinksUnchanged(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "lab")
	prev := map[string][]byte{"same.yaml": []byte("same"), "changed.yaml": []byte("old"), "mode.yaml": []byte("mode"), "shared.yaml": []byte("shared")}
	if err := ReplaceDir(dir, prev); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "mode.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(parent, "backup.yaml")
	if err := os.Link(filepath.Join(dir, "shared.yaml"), backup); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	stat := func(name string) os.FileInfo {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	before := map[string]os.FileInfo{}
	for n := range prev {
		before[n] = stat(n)
	}
	next := map[string][]byte{"same.yaml": []byte("same"), "changed.yaml": []byte("new"), "mode.yaml": []byte("mode"), "shared.yaml": []byte("shared"), "added.yaml": []byte("added")}
	if err := ReplaceDir(dir, next); err != nil {
		t.Fatal(err)
	}
	got := readDir(t, dir)
	for n, want := range next {
		if got[n] != string(want) {
			t.Errorf("%s holds %q, want %q", n, got[n], want)
		}
		if fi := stat(n); fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v", n, fi.Mode().Perm())
		}
	}
	for n, linked := range map[string]bool{"same.yaml": true, "changed.yaml": false, "mode.yaml": false, "shared.yaml": false} {
		if got := os.SameFile(before[n], stat(n)); got != linked {
			t.Errorf("%s: same file as before %v, want %v", n, got, linked)
		}
	}
	if links(stat("same.yaml")) != 1 {
		t.Errorf("same.yaml has %d links after the previous directory went", links(stat("same.yaml")))
	}
	// A change through the backup's link does not reach the render.
	if err := os.WriteFile(backup, []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "shared.yaml")); string(b) != "shared" {
		t.Errorf("shared.yaml changed with the backup: %q", b)
	}
	only(t, parent, "backup.yaml", "lab")
}

// A directory that already holds exactly the files is left as it is (the
// directory and every file the same inode), but still synced; anything
// else about it (a changed, added, missing or extra file, a file's mode,
// another link, the directory's mode) replaces it.
func TestReplaceDirUnchangedWritesNothing(t *testing.T) {
	defer restoreHooks()
	files := map[string][]byte{"a.yaml": []byte("a"), "b.yaml": []byte("bb")}
	for name, change := range map[string]func(t *testing.T, dir string, next map[string][]byte){
		"nothing":        nil,
		"a changed file": func(t *testing.T, dir string, next map[string][]byte) { next["a.yaml"] = []byte("A") },
		"an added file":  func(t *testing.T, dir string, next map[string][]byte) { next["c.yaml"] = []byte("c") },
		"a missing file": func(t *testing.T, dir string, next map[string][]byte) { delete(next, "b.yaml") },
		"an extra entry": func(t *testing.T, dir string, next map[string][]byte) { os.Mkdir(filepath.Join(dir, "sub"), 0o755) },
		"a file's mode":  func(t *testing.T, dir string, next map[string][]byte) { os.Chmod(filepath.Join(dir, "a.yaml"), 0o600) },
		"another link": func(t *testing.T, dir string, next map[string][]byte) {
			os.Link(filepath.Join(dir, "a.yaml"), dir+".backup")
		},
		"the folder mode": func(t *testing.T, dir string, next map[string][]byte) { os.Chmod(dir, 0o700) },
	} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "lab")
			if err := ReplaceDir(dir, files); err != nil {
				t.Fatal(err)
			}
			next := map[string][]byte{}
			for n, b := range files {
				next[n] = b
			}
			if change != nil {
				change(t, dir, next)
			}
			before, err := os.Lstat(dir)
			if err != nil {
				t.Fatal(err)
			}
			syncs := 0
			syncWritten = func(d *os.File, names []string) error { syncs++; return syncDirFiles(d, names) }
			defer restoreHooks()
			replaced, err := ReplaceDirChecked(dir, next, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if replaced != (change != nil) {
				t.Errorf("replaced %v, want %v", replaced, change != nil)
			}
			after, err := os.Lstat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if kept := os.SameFile(before, after); kept != (change == nil) {
				t.Errorf("the folder kept: %v, want %v", kept, change == nil)
			}
			if syncs != 1 {
				t.Errorf("%d syncs, want 1", syncs)
			}
			got := readDir(t, dir)
			if len(got) != len(next) {
				t.Errorf("holds %s", names(got))
			}
			for n, want := range next {
				if got[n] != string(want) {
					t.Errorf("%s holds %q, want %q", n, got[n], want)
				}
				if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || fi.Mode().Perm() != 0o644 {
					t.Errorf("%s: %v %v", n, fi, err)
				}
			}
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("the folder: %v %v", fi, err)
			}
		})
	}
}

// A failed replace that had linked files leaves them as they were: the
// previous content, one link each.
func TestReplaceDirLinkedThenFailed(t *testing.T) {
	defer restoreHooks()
	parent := t.TempDir()
	dir := filepath.Join(parent, "lab")
	if err := ReplaceDir(dir, map[string][]byte{"a.yaml": []byte("a"), "b.yaml": []byte("b")}); err != nil {
		t.Fatal(err)
	}
	swap = func(next, dir string) error {
		if fi, err := os.Stat(filepath.Join(next, "a.yaml")); err != nil || links(fi) != 2 {
			t.Errorf("a.yaml not linked into the new directory: %v", err)
		}
		return errors.New("boom")
	}
	if err := ReplaceDir(dir, map[string][]byte{"a.yaml": []byte("a"), "b.yaml": []byte("B")}); err == nil {
		t.Fatal("the broken replace succeeded")
	}
	if got := readDir(t, dir); got["a.yaml"] != "a" || got["b.yaml"] != "b" || len(got) != 2 {
		t.Errorf("previous directory changed: %v", got)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a.yaml")); err != nil || links(fi) != 1 {
		t.Errorf("a.yaml: %v links, %v", links(fi), err)
	}
	only(t, parent, "lab")
}

// A previous file of the new file's size but other content is replaced,
// not linked; one of the same content is linked; the new directory holds
// the new content either way.
func TestReplaceDirSameSizeOtherContent(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "lab")
	if err := ReplaceDir(dir, map[string][]byte{"a.yaml": []byte("kind: A\n"), "b.yaml": []byte("kind: B\n")}); err != nil {
		t.Fatal(err)
	}
	before := map[string]os.FileInfo{}
	for _, n := range []string{"a.yaml", "b.yaml"} {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		before[n] = fi
	}
	// b.yaml: the same size, one byte different (the last).
	next := map[string][]byte{"a.yaml": []byte("kind: A\n"), "b.yaml": []byte("kind: C\n")}
	if err := ReplaceDir(dir, next); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, dir); got["a.yaml"] != "kind: A\n" || got["b.yaml"] != "kind: C\n" || len(got) != 2 {
		t.Errorf("after the replace: %v", got)
	}
	for n, linked := range map[string]bool{"a.yaml": true, "b.yaml": false} {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if os.SameFile(before[n], fi) != linked {
			t.Errorf("%s: same file as before %v, want %v", n, !linked, linked)
		}
	}
	only(t, parent, "lab")
}

type seen struct {
	typ  os.FileMode
	head string
}

// ReplaceDirChecked shows check every entry of the previous directory, a
// regular file with its first headLen bytes, before anything is written;
// a refusal is returned as it is and leaves the directory, and everything
// beside it, as it was.
func TestReplaceDirChecked(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "lab")
	prev := map[string][]byte{"a.yaml": []byte("# generated\nkind: A\n"), "short.yaml": []byte("# gen"), "notes.txt": []byte("mine")}
	if err := ReplaceDir(dir, prev); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A killed earlier write's leftover: a refusal does not get as far as
	// removing it.
	if err := os.WriteFile(filepath.Join(parent, ".lab.tmp-7"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	got := map[string]seen{}
	check := func(name string, typ os.FileMode, head []byte) error {
		got[name] = seen{typ, string(head)}
		if name == "notes.txt" {
			return refused
		}
		return nil
	}
	// With notes.txt refused, check may stop there; ask again without the
	// refusal to see every entry.
	_, err := ReplaceDirChecked(dir, newDir, len("# generated"), check)
	if !errors.Is(err, refused) || err != refused {
		t.Fatalf("ReplaceDirChecked = %v, want the check's own error", err)
	}
	only(t, dir, "a.yaml", "notes.txt", "short.yaml", "sub")
	if b, err := os.ReadFile(filepath.Join(dir, "a.yaml")); err != nil || string(b) != string(prev["a.yaml"]) {
		t.Errorf("a refused replace changed a.yaml: %q, %v", b, err)
	}
	only(t, parent, ".lab.tmp-7", "lab")

	got = map[string]seen{}
	if err := os.Remove(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReplaceDirChecked(dir, newDir, len("# generated"), check); err != nil {
		t.Fatal(err)
	}
	want := map[string]seen{"a.yaml": {0, "# generated"}, "short.yaml": {0, "# gen"}, "sub": {os.ModeDir, ""}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("check saw %v, want %v", got, want)
	}
	if got := readDir(t, dir); names(got) != "a.yaml,b.yaml,c.yaml" || got["a.yaml"] != "new a" {
		t.Errorf("after the replace: %v", got)
	}
	only(t, parent, "lab")
}

// TestReplaceDirCheckedRefusesEvery: every entry check refuses is in the
// error (joined, in directory order), not only the first, and the folder
// is left as it was.
func TestReplaceDirCheckedRefusesEvery(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	if err := ReplaceDir(dir, map[string][]byte{"a.yaml": []byte("a")}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"notes.txt", "sub.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refusals := map[string]error{}
	_, err := ReplaceDirChecked(dir, map[string][]byte{"a.yaml": []byte("b")}, 0, func(name string, typ fs.FileMode, head []byte) error {
		if strings.HasSuffix(name, ".txt") {
			refusals[name] = fmt.Errorf("holds %s", name)
			return refusals[name]
		}
		return nil
	})
	if len(refusals) != 2 {
		t.Fatalf("check refused %v", refusals)
	}
	for n, r := range refusals {
		if !errors.Is(err, r) {
			t.Errorf("the error %v lacks the refusal of %s", err, n)
		}
	}
	if err == nil || err.Error() != "holds notes.txt\nholds sub.txt" {
		t.Errorf("error %q", err)
	}
	if got := readDir(t, dir); got["a.yaml"] != "a" || len(got) != 3 {
		t.Errorf("the folder changed: %v", got)
	}

	// A folder of many: the first maxRefused, in name order, and a word
	// that there may be more.
	for i := range 30 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("x%02d.txt", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err = ReplaceDirChecked(dir, map[string][]byte{"a.yaml": []byte("b")}, 0, func(name string, typ fs.FileMode, head []byte) error {
		if strings.HasSuffix(name, ".txt") {
			return fmt.Errorf("holds %s", name)
		}
		return nil
	})
	lines := strings.Split(fmt.Sprint(err), "\n")
	if len(lines) != maxRefused+1 || lines[0] != "holds notes.txt" || lines[2] != "holds x00.txt" || lines[maxRefused] != "(and perhaps more: stopped after 20)" {
		t.Errorf("%d lines: %q", len(lines), lines)
	}
}
