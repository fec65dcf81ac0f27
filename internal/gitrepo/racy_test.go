package gitrepo_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/gitrepo/gittest"
)

// An unstaged edit of the same size, made in the second the index was last
// written, is only visible to git while the index keeps that timestamp
// (racy git). CommitOnly rewrites the index later; without smudging the
// entry (ce_smudge_racily_clean_entry), git status would then report the
// file clean and the user's edit would vanish from it. The timestamps are
// set by hand so that the race happens on every run: the first commit, its
// index and the edit all in one past second.
func TestCommitOnlyKeepsRacyEdit(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git binary to read the index as git does")
	}
	r := gittest.Init(t)
	r.Write("deploy/lab/a.yaml", "a: 1\n")
	r.Write("policies/lab/locks.cue", "size: 1\n")
	r.Commit("first")

	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	locks := filepath.Join(r.Dir, "policies/lab/locks.cue")
	// The index entry records the committed file's stat: give the edit the
	// same mtime (and it has the same size), and the index that second too.
	if err := os.Chtimes(locks, past, past); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gitBin, "-C", r.Dir, "update-index", "--refresh").CombinedOutput(); err != nil {
		t.Fatalf("git update-index: %v\n%s", err, out)
	}
	r.Write("policies/lab/locks.cue", "size: 4\n")
	for _, p := range []string{locks, filepath.Join(r.Dir, ".git", "index")} {
		if err := os.Chtimes(p, past, past); err != nil {
			t.Fatal(err)
		}
	}

	r.Write("deploy/lab/a.yaml", "a: 2\n")
	g := open(t, r.Dir)
	if _, err := g.CommitOnly("render", "deploy/lab"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gitBin, "-C", r.Dir, "status", "--porcelain").CombinedOutput()
	if err != nil {
		t.Fatalf("git status: %v\n%s", err, out)
	}
	if want := " M policies/lab/locks.cue\n"; string(out) != want {
		t.Errorf("git status --porcelain after CommitOnly:\n%q\nwant %q (the unstaged edit)", out, want)
	}
}
