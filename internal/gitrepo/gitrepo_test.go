package gitrepo_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"

	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo/gittest"
)

func open(t *testing.T, dir string) *gitrepo.Repo {
	t.Helper()
	g, err := gitrepo.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestResolve(t *testing.T) {
	r := gittest.Init(t)
	r.Write("a.txt", "one\n")
	c1 := r.Commit("first")
	r.Tag("v1")
	r.Write("a.txt", "two\n")
	c2 := r.Commit("second")
	g := open(t, filepath.Join(r.Dir))

	for rev, want := range map[string]string{
		"HEAD": c2, "main": c2, "v1": c1, c1: c1, c1[:7]: c1, strings.ToUpper(c2[:10]): c2, "HEAD~1": c1,
	} {
		got, err := g.Resolve(rev)
		if err != nil {
			t.Errorf("Resolve(%q): %v", rev, err)
			continue
		}
		if got.Hash != want {
			t.Errorf("Resolve(%q) = %s, want %s", rev, got.Hash, want)
		}
	}
	_, err := g.Resolve("0123456789012345678901234567890123456789")
	if !errors.Is(err, gitrepo.ErrUnknownRevision) {
		t.Errorf("unknown full SHA: err = %v, want ErrUnknownRevision", err)
	}
	if _, err := g.Resolve("nosuchbranch"); !errors.Is(err, gitrepo.ErrUnknownRevision) {
		t.Errorf("unknown branch: err = %v", err)
	}
	if _, err := g.Resolve("abc"); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("3 hex digits: err = %v", err)
	}
}

func TestFilesAndLog(t *testing.T) {
	r := gittest.Init(t)
	r.Write("deploy/lab/a.yaml", "a: 1\n")
	r.Write("deploy/lab/sub/b.yaml", "b: 1\n")
	r.Write("README", "x\n")
	c1 := r.Commit("render")
	r.Write("README", "y\n")
	c2 := r.Commit("docs")
	r.Write("deploy/lab/a.yaml", "a: 2\n")
	c3 := r.Commit("render again")
	g := open(t, r.Dir)

	files, ok, err := g.Files(c1, "deploy/lab")
	if err != nil || !ok {
		t.Fatalf("Files: ok=%v err=%v", ok, err)
	}
	want := map[string][]byte{"a.yaml": []byte("a: 1\n"), "sub/b.yaml": []byte("b: 1\n")}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("Files = %q, want %q", files, want)
	}
	if _, ok, err := g.Files(c1, "deploy/local"); ok || err != nil {
		t.Errorf("missing dir: ok=%v err=%v", ok, err)
	}
	if b, ok, _ := g.File(c3, "deploy/lab/a.yaml"); !ok || string(b) != "a: 2\n" {
		t.Errorf("File at c3 = %q, %v", b, ok)
	}

	log, err := g.Log("HEAD", "deploy/lab")
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || log[0].Hash != c3 || log[1].Hash != c1 {
		t.Errorf("Log(deploy/lab) = %v, want [c3 c1]", log)
	}
	behind, anc, err := g.Behind(c1, c3)
	if err != nil {
		t.Fatal(err)
	}
	if !anc || len(behind) != 2 || behind[0].Hash != c3 || behind[1].Hash != c2 {
		t.Errorf("Behind(c1, c3) = %v, ancestor %v", behind, anc)
	}
	if ok, _ := g.ChangedIn(c2, "deploy/lab"); ok {
		t.Error("c2 does not change deploy/lab")
	}
	if ok, _ := g.ChangedIn(c3, "deploy/lab"); !ok {
		t.Error("c3 changes deploy/lab")
	}
}

// CommitOnly commits the named paths and nothing else: other staged and
// unstaged work stays exactly as it was.
func TestCommitOnly(t *testing.T) {
	r := gittest.Init(t)
	r.Write("deploy/lab/a.yaml", "a: 1\n")
	r.Write("deploy/lab/old.yaml", "old\n")
	r.Write("policies/lab/locks.cue", "size: 1\n")
	r.Write("notes.txt", "notes\n")
	c1 := r.Commit("first")

	// Unrelated work: a staged change, an unstaged change, an untracked file.
	r.Write("notes.txt", "staged notes\n")
	wt, _ := r.Git.Worktree()
	if _, err := wt.Add("notes.txt"); err != nil {
		t.Fatal(err)
	}
	r.Write("policies/lab/locks.cue", "size: 4\n")
	r.Write("scratch.txt", "untracked\n")
	// The render changes: one file changed, one removed, one added.
	r.Write("deploy/lab/a.yaml", "a: 2\n")
	r.Remove("deploy/lab/old.yaml")
	r.Write("deploy/lab/new.yaml", "new\n")

	g := open(t, r.Dir)
	dirty, err := g.Dirty("deploy/lab")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"notes.txt", "policies/lab/locks.cue"}; !reflect.DeepEqual(dirty, want) {
		t.Errorf("Dirty = %v, want %v", dirty, want)
	}

	t.Setenv("GIT_AUTHOR_NAME", "Render Bot")
	t.Setenv("GIT_AUTHOR_EMAIL", "bot@lab.internal")
	c, err := g.CommitOnly("render lab", "deploy/lab")
	if err != nil {
		t.Fatal(err)
	}
	files, _, _ := g.Files(c.Hash, "")
	got := map[string]string{}
	for k, v := range files {
		got[k] = string(v)
	}
	want := map[string]string{
		"deploy/lab/a.yaml":      "a: 2\n",
		"deploy/lab/new.yaml":    "new\n",
		"policies/lab/locks.cue": "size: 1\n",
		"notes.txt":              "notes\n",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("committed tree = %q\nwant %q", got, want)
	}
	head, _ := g.Head()
	if head.Hash != c.Hash || head.Author != "Render Bot" {
		t.Errorf("HEAD = %+v, want the new commit by Render Bot", head)
	}
	behind, _, _ := g.Behind(c1, c.Hash)
	if len(behind) != 1 {
		t.Errorf("the commit's parent is not c1")
	}

	// Work is intact: files on disk, the staged change still staged, the
	// render clean.
	if s := r.Read("policies/lab/locks.cue"); s != "size: 4\n" {
		t.Errorf("locks.cue on disk = %q", s)
	}
	if s := r.Read("scratch.txt"); s != "untracked\n" {
		t.Errorf("scratch.txt = %q", s)
	}
	st, err := wt.Status()
	if err != nil {
		t.Fatal(err)
	}
	if s := st.File("notes.txt"); s.Staging != git.Modified {
		t.Errorf("notes.txt staging = %c, want M (still staged)", s.Staging)
	}
	if s := st.File("policies/lab/locks.cue"); s.Worktree != git.Modified {
		t.Errorf("locks.cue worktree = %c, want M", s.Worktree)
	}
	for _, p := range []string{"deploy/lab/a.yaml", "deploy/lab/new.yaml", "deploy/lab/old.yaml"} {
		if s, ok := st[p]; ok && (s.Staging != git.Unmodified || s.Worktree != git.Unmodified) {
			t.Errorf("%s after commit: staging %c worktree %c, want clean", p, s.Staging, s.Worktree)
		}
	}

	// Where git itself is installed, it agrees.
	if gitBin, err := exec.LookPath("git"); err == nil {
		out, err := exec.Command(gitBin, "-C", r.Dir, "status", "--porcelain").CombinedOutput()
		if err != nil {
			t.Fatalf("git status: %v\n%s", err, out)
		}
		if want := "M  notes.txt\n M policies/lab/locks.cue\n?? scratch.txt\n"; string(out) != want {
			t.Errorf("git status --porcelain:\n%s\nwant:\n%s", out, want)
		}
		if out, err := exec.Command(gitBin, "-C", r.Dir, "fsck", "--strict").CombinedOutput(); err != nil {
			t.Errorf("git fsck: %v\n%s", err, out)
		}
	}

	if _, err := g.CommitOnly("again", "deploy/lab"); !errors.Is(err, gitrepo.ErrNothingToCommit) {
		t.Errorf("second commit: err = %v, want ErrNothingToCommit", err)
	}
}

func TestOpenOutsideRepo(t *testing.T) {
	dir := t.TempDir()
	if _, err := gitrepo.Open(dir); err == nil || !strings.Contains(err.Error(), "not in a git repository") {
		t.Errorf("Open(non-repo) err = %v", err)
	}
	r := gittest.Init(t)
	if err := os.MkdirAll(filepath.Join(r.Dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	g := open(t, filepath.Join(r.Dir, "a", "b"))
	rel, err := g.Rel(filepath.Join(r.Dir, "a", "b"))
	if err != nil || rel != "a/b" {
		t.Errorf("Rel = %q, %v", rel, err)
	}
}
