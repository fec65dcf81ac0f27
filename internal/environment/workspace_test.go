package environment_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo/gittest"
)

// labRepo is a repository holding the lab policy and the lab environment
// (unpinned), committed; with rendered, deploy/lab too.
func labRepo(t *testing.T, rendered bool) (*gittest.Repo, *environment.Workspace) {
	t.Helper()
	r := gittest.Init(t)
	// The lab with its locks as the write-ups' series had them (main 4,
	// cache 1): these tests change a lock and read its semaphore ConfigMap.
	for _, f := range []string{"policy.cue", "priorities.cue", "queues.cue", "services.cue"} {
		r.Write("policies/lab/"+f, readFile(t, filepath.Join(repoRoot, "policies/lab", f)))
	}
	for _, f := range []string{"locks.cue", "templates.cue"} {
		r.Write("policies/lab/"+f, readFile(t, filepath.Join(repoRoot, "cmd/gpupolicy/testdata/lab-series", f)))
	}
	r.Write("environments/lab/kustomization.yaml", readFile(t, filepath.Join(repoRoot, "environments/lab/kustomization.yaml")))
	r.Write("environments/lab/environment.yaml", "# the lab\npolicy: policies/lab\npin: \"\" # set by gpupolicy pin\n")
	r.Write("notes.txt", "notes\n")
	r.Commit("lab")
	w := open(t, r)
	if rendered {
		files, err := w.RenderWorktree()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteDeploy(files); err != nil {
			t.Fatal(err)
		}
		r.Commit("deploy/lab: render lab")
	}
	return r, w
}

func open(t *testing.T, r *gittest.Repo) *environment.Workspace {
	t.Helper()
	w, err := environment.Open(r.Dir, "lab", true)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestOpen(t *testing.T) {
	r, w := labRepo(t, false)
	if w.Repo == nil || w.Root != r.Dir || w.Env.Policy != "policies/lab" {
		t.Errorf("Open: repo %v, root %q, policy %q", w.Repo, w.Root, w.Env.Policy)
	}
	// From a subdirectory; Path is relative to the current directory.
	w, err := environment.Open(filepath.Join(r.Dir, "policies"), "lab", true)
	if err != nil {
		t.Fatal(err)
	}
	if abs, _ := filepath.Abs(w.Path("deploy/lab")); w.Root != r.Dir || abs != filepath.Join(r.Dir, "deploy", "lab") {
		t.Errorf("from policies/: root %q, Path names %q", w.Root, abs)
	}
	// Outside git: only with needGit false.
	plain := t.TempDir()
	if err := os.CopyFS(filepath.Join(plain, "environments"), os.DirFS(filepath.Join(r.Dir, "environments"))); err != nil {
		t.Fatal(err)
	}
	if _, err := environment.Open(plain, "lab", true); err == nil {
		t.Error("Open outside git with needGit succeeded")
	}
	if w, err := environment.Open(plain, "lab", false); err != nil || w.Repo != nil || w.Root != plain {
		t.Errorf("Open outside git: %v, %v", w, err)
	}
	if _, err := environment.Open(r.Dir, "Lab/..", false); err == nil {
		t.Error("a bad name is accepted")
	}
}

// A commit of deploy/ENV is refused when the render would match no commit:
// tracked changes anywhere but deploy/ENV, untracked files in the policy or
// the environment. Other untracked files do not matter.
func TestCheckCommittable(t *testing.T) {
	r, w := labRepo(t, true)
	if err := w.CheckCommittable(); err != nil {
		t.Fatalf("clean tree: %v", err)
	}
	r.Write("scratch.txt", "untracked, elsewhere")
	r.Write("deploy/lab/namespace_llm.yaml", "edited")
	if err := w.CheckCommittable(); err != nil {
		t.Fatalf("only deploy/lab and an untracked file elsewhere changed: %v", err)
	}
	r.Write("notes.txt", "edited")
	r.Write("policies/lab/extra.cue", "package lab\n")
	err := w.CheckCommittable()
	if err == nil {
		t.Fatal("a dirty tree is committable")
	}
	for _, want := range []string{"refusing to commit deploy/lab", "\n  notes.txt\n", "\n  policies/lab/extra.cue (untracked)\n", "nothing was written"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "scratch.txt") || strings.Contains(err.Error(), "namespace_llm") {
		t.Errorf("error names what does not matter:\n%v", err)
	}
}

// Uncommitted edits in deploy/ENV that the render would overwrite are
// refused; edits the render reproduces, and deletions, are not.
func TestCheckHandEdits(t *testing.T) {
	r, w := labRepo(t, true)
	files, err := w.RenderWorktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.CheckHandEdits(files); err != nil {
		t.Fatalf("no edits: %v", err)
	}
	r.Remove("deploy/lab/namespace_llm.yaml")
	r.Write("notes.txt", "elsewhere")
	if err := w.CheckHandEdits(files); err != nil {
		t.Fatalf("a deletion and an edit elsewhere: %v", err)
	}
	r.Write("deploy/lab/configmap_experiments_gpu-semaphore.yaml", "hand-edited\n")
	r.Write("deploy/lab/extra.yaml", "a file the render does not make\n")
	err = w.CheckHandEdits(files)
	if err == nil {
		t.Fatal("hand edits would be overwritten")
	}
	for _, want := range []string{"\n  deploy/lab/configmap_experiments_gpu-semaphore.yaml\n", "\n  deploy/lab/extra.yaml\n", "(environments/lab)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// An edit the render reproduces loses nothing.
	r.Remove("deploy/lab/extra.yaml")
	r.Write("deploy/lab/configmap_experiments_gpu-semaphore.yaml", string(files["configmap_experiments_gpu-semaphore.yaml"]))
	if err := w.CheckHandEdits(files); err != nil {
		t.Errorf("with the render's content: %v", err)
	}
}

func TestCommitDeploy(t *testing.T) {
	r, w := labRepo(t, false)
	head := r.Head()
	files, err := w.RenderWorktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteDeploy(files); err != nil {
		t.Fatal(err)
	}
	r.Write("notes.txt", "uncommitted")
	c, err := w.CommitDeploy()
	if err != nil {
		t.Fatal(err)
	}
	if want := "deploy/lab: render policies/lab for lab"; c.Subject != want {
		t.Errorf("subject %q, want %q", c.Subject, want)
	}
	if got, _ := w.Repo.Log(c.Hash, "deploy", "notes.txt", "policies"); len(got) != 2 || got[1].Hash != head {
		t.Errorf("log %v, want the commit on %s", got, head)
	}
	if _, ok, _ := w.Repo.File(c.Hash, "deploy/lab/kustomization.yaml"); !ok {
		t.Error("the commit lacks deploy/lab")
	}
	if b, _, _ := w.Repo.File(c.Hash, "notes.txt"); string(b) != "notes\n" {
		t.Errorf("the commit took notes.txt: %q", b)
	}
	if _, err := w.CommitDeploy(); !errors.Is(err, gitrepo.ErrNothingToCommit) {
		t.Errorf("second commit: %v, want ErrNothingToCommit", err)
	}
}

// CheckDeploy lists what a render would add, remove and change in
// deploy/ENV, and explains it; it writes nothing.
func TestCheckDeploy(t *testing.T) {
	r, w := labRepo(t, false)
	t.Chdir(r.Dir)
	files, err := w.RenderWorktree()
	if err != nil {
		t.Fatal(err)
	}
	c, err := w.CheckDeploy(files)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c.Text(&out)
	if !c.Stale() || out.String() != "deploy/lab has no render; rendering would add 27 files\n" {
		t.Errorf("no render: stale %v, %q", c.Stale(), out.String())
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "deploy")); !os.IsNotExist(err) {
		t.Fatal("CheckDeploy wrote deploy/")
	}

	if err := w.WriteDeploy(files); err != nil {
		t.Fatal(err)
	}
	c, _ = w.CheckDeploy(files)
	out.Reset()
	c.Text(&out)
	if c.Stale() || out.String() != "deploy/lab is up to date (27 files)\n" {
		t.Errorf("up to date: stale %v, %q", c.Stale(), out.String())
	}

	r.Remove("deploy/lab/namespace_llm.yaml")
	r.Write("deploy/lab/namespace_old.yaml", strings.Replace(string(files["namespace_llm.yaml"]), "name: llm", "name: old", 1))
	sem := "configmap_experiments_gpu-semaphore.yaml"
	r.Write("deploy/lab/"+sem, strings.Replace(string(files[sem]), `main: "4"`, `main: "1"`, 1))
	c, _ = w.CheckDeploy(files)
	want := []environment.FileDiff{
		{Name: sem, Change: drift.Changed},
		{Name: "namespace_llm.yaml", Change: drift.Added},
		{Name: "namespace_old.yaml", Change: drift.Removed},
	}
	if len(c.Changes) != len(want) {
		t.Fatalf("changes %v, want %v", c.Changes, want)
	}
	for i := range want {
		if c.Changes[i] != want[i] {
			t.Errorf("change %d: %v, want %v", i, c.Changes[i], want[i])
		}
	}
	out.Reset()
	c.Text(&out)
	for _, line := range []string{
		"deploy/lab is stale: rendering policies/lab for lab would change 3 file(s):\n",
		"\n  changed: " + sem + "\n  added:   namespace_llm.yaml\n  removed: namespace_old.yaml\n",
		"Lock main holds 1 at deploy/lab and 4 at the render",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, out.String())
		}
	}
}

// mainLockSize is how cmd/gpupolicy/testdata/lab-series/locks.cue sizes
// the main lock (from the general queue's quota: 4); a test that needs
// another size puts a number in its place.
const mainLockSize = `size: {fromQueue: "gpu-general", state: "on-demand-down"}`

// MovePin writes the full SHA and commits environment.yaml alone, leaving
// other work as it was; it says what the move deploys, and refuses to
// commit over uncommitted edits of environment.yaml.
func TestMovePin(t *testing.T) {
	r, w := labRepo(t, true)
	first := r.Head()
	locks := readFile(t, filepath.Join(repoRoot, "cmd/gpupolicy/testdata/lab-series/locks.cue"))
	if !strings.Contains(locks, mainLockSize) {
		t.Fatalf("lab-series/locks.cue no longer sizes the main lock with %s", mainLockSize)
	}
	r.Write("policies/lab/locks.cue", strings.Replace(locks, mainLockSize, "size: 2", 1))
	files, err := w.RenderWorktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteDeploy(files); err != nil {
		t.Fatal(err)
	}
	second := r.Commit("main lock to 2")
	r.Write("notes.txt", "uncommitted")
	ctx := context.Background()

	m, err := w.MovePin(ctx, first[:7])
	if err != nil {
		t.Fatal(err)
	}
	if m.Old != "" || m.Target.Hash != first || m.Report != nil || m.Already {
		t.Errorf("first pin: %+v", m)
	}
	settings := r.Read("environments/lab/environment.yaml")
	if want := "# the lab\npolicy: policies/lab\npin: \"" + first + "\" # set by gpupolicy pin\n"; settings != want {
		t.Errorf("environment.yaml:\n%s\nwant:\n%s", settings, want)
	}
	if r.Read("notes.txt") != "uncommitted" {
		t.Error("notes.txt changed")
	}
	if b, _, _ := w.Repo.File(m.Commit.Hash, "notes.txt"); string(b) != "notes\n" {
		t.Errorf("the pin commit took notes.txt: %q", b)
	}
	if got, _ := w.Repo.Dirty(); strings.Join(got, " ") != "notes.txt" {
		t.Errorf("dirty after the pin: %v", got)
	}

	w = open(t, r)
	if m, err := w.MovePin(ctx, first); err != nil || !m.Already {
		t.Errorf("pin to the pin: %+v, %v", m, err)
	}
	m, err = w.MovePin(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if m.Old != first || m.Report == nil || !m.Report.Drifted() {
		t.Fatalf("second move: %+v", m)
	}
	found := false
	for _, d := range m.Report.Differences {
		found = found || d.Path == "data.main" && d.From == "4" && d.To == "2"
	}
	if !found {
		t.Errorf("the move does not lower the lock: %v", m.Report.Differences)
	}

	// environment.yaml with uncommitted edits: refused, nothing written.
	w = open(t, r)
	edited := r.Read("environments/lab/environment.yaml") + "# mine\n"
	r.Write("environments/lab/environment.yaml", edited)
	head := r.Head()
	if _, err := w.MovePin(ctx, first); err == nil || !strings.Contains(err.Error(), "uncommitted changes") {
		t.Errorf("MovePin over an edit: %v", err)
	}
	if r.Read("environments/lab/environment.yaml") != edited || r.Head() != head {
		t.Error("a refused pin wrote something")
	}
	if _, err := w.MovePin(ctx, "no-such-rev"); err == nil {
		t.Error("an unknown revision was pinned")
	}
	entries, _ := os.ReadDir(filepath.Join(r.Dir, "environments/lab"))
	if len(entries) != 2 {
		t.Errorf("environments/lab holds %v (a temporary left?)", entries)
	}
}
