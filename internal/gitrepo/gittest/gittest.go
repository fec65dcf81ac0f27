// Package gittest builds small git repositories for tests, with go-git: a
// test reads like the history it replays.
//
//	r := gittest.Init(t)
//	r.Write("deploy/lab/x.yaml", "...")
//	c1 := r.Commit("render without the declaration")
package gittest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Repo is a repository in a temporary directory.
type Repo struct {
	t    testing.TB
	Dir  string
	Git  *git.Repository
	when time.Time
}

// Init creates an empty repository in a new temporary directory, on
// branch main.
func Init(t testing.TB) *Repo {
	t.Helper()
	return InitAt(t, t.TempDir())
}

// InitAt creates an empty repository in dir, on branch main.
func InitAt(t testing.TB, dir string) *Repo {
	t.Helper()
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := r.Config()
	if err != nil {
		t.Fatal(err)
	}
	cfg.User.Name = "Lab Tester"
	cfg.User.Email = "tester@lab.internal"
	if err := r.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return &Repo{t: t, Dir: dir, Git: r, when: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)}
}

// Write writes a file (slash path relative to the root), creating
// directories.
func (r *Repo) Write(path, content string) {
	r.t.Helper()
	p := filepath.Join(r.Dir, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// WriteFiles writes files under dir.
func (r *Repo) WriteFiles(dir string, files map[string][]byte) {
	r.t.Helper()
	for name, b := range files {
		r.Write(filepath.ToSlash(filepath.Join(dir, name)), string(b))
	}
}

// Remove deletes a file or directory.
func (r *Repo) Remove(path string) {
	r.t.Helper()
	if err := os.RemoveAll(filepath.Join(r.Dir, filepath.FromSlash(path))); err != nil {
		r.t.Fatal(err)
	}
}

// Read returns a file's content.
func (r *Repo) Read(path string) string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.Dir, filepath.FromSlash(path)))
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

// Commit stages everything (new, changed and deleted files) and commits
// it, one minute after the previous commit; it returns the full hash.
func (r *Repo) Commit(msg string) string {
	r.t.Helper()
	wt, err := r.Git.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		r.t.Fatal(err)
	}
	r.when = r.when.Add(time.Minute)
	sig := &object.Signature{Name: "Lab Tester", Email: "tester@lab.internal", When: r.when}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig, All: true})
	if err != nil {
		r.t.Fatal(err)
	}
	return h.String()
}

// Tag creates a lightweight tag at HEAD.
func (r *Repo) Tag(name string) {
	r.t.Helper()
	head, err := r.Git.Head()
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.Git.CreateTag(name, head.Hash(), nil); err != nil {
		r.t.Fatal(err)
	}
}

// Head returns HEAD's full hash.
func (r *Repo) Head() string {
	r.t.Helper()
	head, err := r.Git.Head()
	if err != nil {
		r.t.Fatal(err)
	}
	return head.Hash().String()
}
