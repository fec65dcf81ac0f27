package atomicfile

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// asNobody is the uid and gid the read-only test runs as when the tests run
// as root, for whom permission bits stop no removal.
const asNobody = 65534

// TestReplaceDirReadOnlyPrevious: a folder its user made read-only (chmod
// 555) is replaced, and what it held removed, with nothing left beside it;
// the next replace works too. Run as root, the test runs itself again as
// nobody, in a folder nobody owns.
func TestReplaceDirReadOnlyPrevious(t *testing.T) {
	parent := os.Getenv("ATOMICFILE_READONLY_PARENT")
	if parent == "" && os.Getuid() == 0 {
		base, err := os.MkdirTemp("", "atomicfile-readonly-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(base)
		// The test binary where nobody may run it, and a parent nobody owns.
		bin := filepath.Join(base, "atomicfile.test")
		if err := copyFile(os.Args[0], bin); err != nil {
			t.Fatal(err)
		}
		parent = filepath.Join(base, "work")
		for _, p := range []string{base, parent} {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(parent, asNobody, asNobody); err != nil {
			t.Skipf("cannot give nobody a folder here: %v", err)
		}
		cmd := exec.Command(bin, "-test.run=^TestReplaceDirReadOnlyPrevious$", "-test.v")
		cmd.Dir = parent
		cmd.Env = append(os.Environ(), "ATOMICFILE_READONLY_PARENT="+parent)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: asNobody, Gid: asNobody}}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			// A noexec TMPDIR, or no switching to nobody here.
			t.Skipf("cannot run the test as nobody here: %v", err)
		}
		if err != nil || !strings.Contains(string(out), "--- PASS: TestReplaceDirReadOnlyPrevious") {
			t.Fatalf("as nobody: %v\n%s", err, out)
		}
		return
	}
	if parent == "" {
		parent = t.TempDir()
	}
	dir := filepath.Join(parent, "lab")
	if err := ReplaceDir(dir, map[string][]byte{"a.yaml": []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "probe.yaml"), nil, 0o644); err == nil {
		t.Skip("a read-only folder is writable here")
	}
	for i, content := range []string{"b", "c"} {
		if err := ReplaceDir(dir, map[string][]byte{"a.yaml": []byte(content)}); err != nil {
			t.Fatalf("replace %d: %v", i+1, err)
		}
		if got := readDir(t, dir); got["a.yaml"] != content || len(got) != 1 {
			t.Errorf("replace %d: holds %v", i+1, got)
		}
		only(t, parent, "lab")
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(dir, 0o755) // for the test's own clean-up
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestReplaceDirRefusesSymlink: a symbolic link where the directory goes is
// refused as what it is (replacing it would put a directory in the link's
// place), and neither it nor what it points to changes.
func TestReplaceDirRefusesSymlink(t *testing.T) {
	parent := t.TempDir()
	real := filepath.Join(parent, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(parent, "link")
	if err := os.Symlink("real", link); err != nil {
		t.Fatal(err)
	}
	err := ReplaceDir(link, map[string][]byte{"a.yaml": []byte("a")})
	if err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Fatalf("got %v, want a refusal naming the symbolic link", err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link: %v %v", fi, err)
	}
	if got := readDir(t, real); len(got) != 0 {
		t.Errorf("the linked directory holds %v", got)
	}
	only(t, parent, "link", "real")
}
