//go:build unix

package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A FIFO or a symbolic link in the previous directory is shown to check as
// what it is, with no head, and neither is opened through (a FIFO would
// block the read) nor linked, even under a new file's name.
func TestReplaceDirPreviousSpecialFiles(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "lab")
	if err := ReplaceDir(dir, map[string][]byte{"target.yaml": []byte("new a")}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "b.yaml"), 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	if err := os.Symlink("target.yaml", filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	got := map[string]seen{}
	done := make(chan error, 1)
	go func() {
		_, err := ReplaceDirChecked(dir, newDir, 8, func(name string, typ os.FileMode, head []byte) error {
			got[name] = seen{typ, string(head)}
			return nil
		})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReplaceDirChecked blocked on the FIFO")
	}
	for name, want := range map[string]seen{"a.yaml": {os.ModeSymlink, ""}, "b.yaml": {os.ModeNamedPipe, ""}, "target.yaml": {0, "new a"}} {
		if got[name] != want {
			t.Errorf("check saw %s as %v, want %v", name, got[name], want)
		}
	}
	for name, want := range newDir {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || links(fi) != 1 {
			t.Fatalf("%s: %v, %v; want a regular file of its own", name, fi, err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != string(want) {
			t.Errorf("%s holds %q, want %q", name, b, want)
		}
	}
	only(t, parent, "lab")
}

// A previous file read unchanged but written to before it is linked (the
// same inode, a new modification time) is not linked: the caller writes
// the new content instead.
func TestLinkUnchangedRefusesAFileChangedSinceRead(t *testing.T) {
	parent := t.TempDir()
	for _, d := range []string{"prev", "next"} {
		if err := os.Mkdir(filepath.Join(parent, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(parent, "prev", "a.yaml")
	if err := os.WriteFile(p, []byte("same"), 0o644); err != nil {
		t.Fatal(err)
	}
	prev, err := openDir(filepath.Join(parent, "prev"))
	if err != nil {
		t.Fatal(err)
	}
	defer prev.Close()
	next, err := openDir(filepath.Join(parent, "next"))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	_, id, same, _ := prev.readPrevious("a.yaml", []byte("same"), true, 0, nil)
	if !same {
		t.Fatal("an unchanged file read as changed")
	}
	// Written in place, the same size: only the modification time tells.
	if err := os.WriteFile(p, []byte("SAME"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, time.Time{}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if linkUnchanged(prev, next, "a.yaml", id) {
		t.Error("a file changed since it was read was linked")
	}
	only(t, filepath.Join(parent, "next"))

	// Read again, it links.
	_, id, same, _ = prev.readPrevious("a.yaml", []byte("SAME"), true, 0, nil)
	if !same || !linkUnchanged(prev, next, "a.yaml", id) {
		t.Fatalf("an unchanged file was not linked (same %v)", same)
	}
	only(t, filepath.Join(parent, "next"), "a.yaml")
}

// Files are made mode 0644 whatever the umask: one that masks some of its
// bits (077) and one that masks none (0).
func TestReplaceDirModeWhateverTheUmask(t *testing.T) {
	for _, mask := range []int{0o077, 0o022, 0} {
		old := syscall.Umask(mask)
		parent := t.TempDir()
		dir := filepath.Join(parent, "lab")
		err := ReplaceDir(dir, newDir)
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		for name := range newDir {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o644 {
				t.Errorf("umask %03o: %s: mode %v, %v; want 0644", mask, name, fi.Mode().Perm(), err)
			}
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("umask %03o: %s: mode %v, %v; want 0755", mask, dir, fi.Mode().Perm(), err)
		}
	}
}
