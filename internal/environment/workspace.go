package environment

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/atomicfile"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render"
)

// Workspace is an environment as the working tree of its repository holds
// it: what render --env, pin, drift and reconcile act on.
type Workspace struct {
	// Repo is nil outside a git repository (only a plain render works
	// then).
	Repo *gitrepo.Repo
	// Root is the repository root (the opened directory outside git).
	Root string
	Env  *Environment
}

// Open loads environment name from the repository around dir (the
// directory itself outside git). With needGit it fails outside a git
// repository.
func Open(dir, name string, needGit bool) (*Workspace, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	w := &Workspace{}
	repo, err := gitrepo.Open(dir)
	switch {
	case err == nil:
		w.Repo, w.Root = repo, repo.Root
	case needGit:
		return nil, err
	default:
		if w.Root, err = filepath.Abs(dir); err != nil {
			return nil, err
		}
	}
	if w.Env, err = Load(w.Root, name); err != nil {
		return nil, err
	}
	return w, nil
}

// Path turns a slash path relative to the repository root into one
// relative to the current directory (absolute when that fails), for
// loading and for messages.
func (w *Workspace) Path(p string) string {
	abs := w.abs(p)
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, abs); err == nil {
			return r
		}
	}
	return abs
}

// abs is a root-relative slash path on disk.
func (w *Workspace) abs(p string) string { return filepath.Join(w.Root, filepath.FromSlash(p)) }

// RenderWorktree renders the environment from the policy in the working
// tree.
func (w *Workspace) RenderWorktree() (map[string][]byte, error) {
	p, err := policy.Load(w.Path(w.Env.Policy))
	if err != nil {
		return nil, err
	}
	return w.Env.Render(p)
}

// RenderAt renders the environment at a commit from git objects, for
// commits without deploy/ENV (a drift.RenderAtFunc).
func (w *Workspace) RenderAt(commit string) (map[string][]byte, string, error) {
	return RenderAt(w.Repo, commit, w.Env.Name, w.Env)
}

// WriteDeploy replaces deploy/ENV with files, atomically (render.Write).
func (w *Workspace) WriteDeploy(files map[string][]byte) error {
	return render.Write(w.abs(w.Env.DeployDir()), files)
}

// CheckCommittable refuses a commit of deploy/ENV when the render would not
// match HEAD: tracked files outside deploy/ENV with uncommitted changes, or
// untracked files in the policy or the environment's directory.
func (w *Workspace) CheckCommittable() error {
	changes, err := w.Repo.Changes()
	if err != nil {
		return err
	}
	var dirty []string
	for _, c := range changes {
		switch {
		case gitrepo.Under(c.Path, w.Env.DeployDir()):
		case c.Untracked && gitrepo.Under(c.Path, w.Env.Policy, w.Env.Dir()):
			dirty = append(dirty, c.Path+" (untracked)")
		case !c.Untracked:
			dirty = append(dirty, c.Path)
		}
	}
	if len(dirty) == 0 {
		return nil
	}
	return fmt.Errorf("refusing to commit %s: these files have uncommitted changes, so the render would match no commit:\n  %s\ncommit or stash them first; nothing was written",
		w.Env.DeployDir(), strings.Join(dirty, "\n  "))
}

// CheckHandEdits refuses to overwrite uncommitted edits in deploy/ENV that
// the render files would not reproduce.
func (w *Workspace) CheckHandEdits(files map[string][]byte) error {
	changes, err := w.Repo.Changes()
	if err != nil {
		return err
	}
	var lost []string
	for _, c := range changes {
		if !gitrepo.Under(c.Path, w.Env.DeployDir()) {
			continue
		}
		name := strings.TrimPrefix(c.Path, w.Env.DeployDir()+"/")
		disk, err := os.ReadFile(w.abs(c.Path))
		if err != nil {
			continue // deleted: the render decides
		}
		if want, ok := files[name]; !ok || !bytes.Equal(want, disk) {
			lost = append(lost, c.Path)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("refusing to commit %s: these generated files have uncommitted edits the render would overwrite:\n  %s\nput them in the policy or the overlay (%s), or discard them; nothing was written",
		w.Env.DeployDir(), strings.Join(lost, "\n  "), w.Env.Dir())
}

// CommitDeploy commits deploy/ENV as the working tree holds it, and
// nothing else. It returns gitrepo.ErrNothingToCommit when HEAD already
// holds it.
func (w *Workspace) CommitDeploy() (gitrepo.Commit, error) {
	head, err := w.Repo.Head()
	if err != nil {
		return gitrepo.Commit{}, err
	}
	e := w.Env
	msg := fmt.Sprintf("%s: render %s for %s\n\nRendered by gpupolicy render --env %s --commit from %s at %s.",
		e.DeployDir(), e.Policy, e.Name, e.Name, e.Policy, head.Short())
	return w.Repo.CommitOnly(msg, e.DeployDir())
}

// DeployCheck compares a fresh render with deploy/ENV on disk (render
// --env --check).
type DeployCheck struct {
	// Env is the environment; Dir is deploy/ENV as shown to the user.
	Env *Environment
	Dir string
	// Files are the render's files; Disk, deploy/ENV's.
	Files, Disk map[string][]byte
	// Changes are the files that differ, by name.
	Changes []FileDiff
}

// FileDiff is one file of deploy/ENV that a render would add, remove or
// change.
type FileDiff struct {
	Name   string
	Change drift.Change
}

// CheckDeploy compares files, a fresh render, with deploy/ENV on disk. It
// reads and writes nothing else.
func (w *Workspace) CheckDeploy(files map[string][]byte) (*DeployCheck, error) {
	dir := w.abs(w.Env.DeployDir())
	c := &DeployCheck{Env: w.Env, Dir: w.Path(w.Env.DeployDir()), Files: files, Disk: map[string][]byte{}}
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		c.Disk[e.Name()] = b
	}
	names := map[string]bool{}
	for n := range files {
		names[n] = true
	}
	for n := range c.Disk {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		want, inRender := files[n]
		have, inDeploy := c.Disk[n]
		switch {
		case inRender && !inDeploy:
			c.Changes = append(c.Changes, FileDiff{n, drift.Added})
		case !inRender && inDeploy:
			c.Changes = append(c.Changes, FileDiff{n, drift.Removed})
		case !bytes.Equal(want, have):
			c.Changes = append(c.Changes, FileDiff{n, drift.Changed})
		}
	}
	return c, nil
}

// Stale reports whether deploy/ENV differs from the render.
func (c *DeployCheck) Stale() bool { return len(c.Changes) > 0 }

// Text prints the check: up to date, or each file that differs and what
// the differences mean, object by object.
func (c *DeployCheck) Text(out io.Writer) {
	if !c.Stale() {
		fmt.Fprintf(out, "%s is up to date (%d files)\n", c.Dir, len(c.Files))
		return
	}
	if len(c.Disk) == 0 {
		fmt.Fprintf(out, "%s has no render; rendering would add %d files\n", c.Dir, len(c.Files))
		return
	}
	lines := make([]string, len(c.Changes))
	for i, f := range c.Changes {
		lines[i] = fmt.Sprintf("  %-8s %s", string(f.Change)+":", f.Name)
	}
	fmt.Fprintf(out, "%s is stale: rendering %s for %s would change %d file(s):\n%s\n",
		c.Dir, c.Env.Policy, c.Env.Name, len(lines), strings.Join(lines, "\n"))
	from, err := drift.Parse(c.Disk)
	if err != nil {
		return
	}
	to, err := drift.Parse(c.Files)
	if err != nil {
		return
	}
	ds := drift.Compare(from, to)
	sides := drift.Sides{From: c.Env.DeployDir(), To: "the render"}
	drift.Explain(ds, from, to, sides)
	if len(ds) > 0 {
		fmt.Fprintln(out)
		drift.WriteText(out, ds, sides, false)
	}
}

// Pinned reads the environment's render at its pin from git objects.
func (w *Workspace) Pinned(ctx context.Context) (drift.Set, *drift.GitSide, error) {
	e := w.Env
	if e.Pin == "" {
		return nil, nil, fmt.Errorf("environment %s has no pin yet (%s): set one with gpupolicy pin --env %s",
			e.Name, e.SettingsPath(), e.Name)
	}
	commit, err := w.Repo.Resolve(e.Pin)
	if err != nil {
		return nil, nil, fmt.Errorf("environment %s: the pin in %s: %v\nmove it with gpupolicy pin --env %s [REV]",
			e.Name, e.SettingsPath(), err, e.Name)
	}
	side := &drift.GitSide{Repo: w.Repo, Env: e.Name, Commit: commit, RenderAt: w.RenderAt, Name: drift.GitSides.From}
	set, err := side.Objects(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("the render at the pin: %w", err)
	}
	return set, side, nil
}

// PinSides name the two ends of a pin move in reports.
var PinSides = drift.Sides{From: "the old pin", To: "the new pin"}

// PinMove is what MovePin did.
type PinMove struct {
	// Old is the previous pin (empty: unpinned); Target, the commit now
	// pinned.
	Old    string
	Target gitrepo.Commit
	// Already: the pin was at Target; nothing was written.
	Already bool
	// Commit is the commit holding the new environment.yaml.
	Commit gitrepo.Commit
	// Report is what the move deploys: the render at the old pin against
	// the render at the new one. It is nil on a first pin, and when the old
	// pin names no commit of the repository (OldUnknown).
	Report     *drift.Report
	OldUnknown bool
}

// MovePin moves the environment's pin to rev (a SHA, branch, tag or HEAD):
// it writes the full SHA into environment.yaml, atomically, and commits that
// file alone; other uncommitted work is left as it is. It refuses when
// environment.yaml has uncommitted changes. What the move deploys is
// compared before anything is written; if the commit fails the file is put
// back.
func (w *Workspace) MovePin(ctx context.Context, rev string) (*PinMove, error) {
	settings := w.Env.SettingsPath()
	target, err := w.Repo.Resolve(rev)
	if err != nil {
		return nil, err
	}
	m := &PinMove{Old: w.Env.Pin, Target: target}
	if m.Old == target.Hash {
		m.Already = true
		return m, nil
	}
	dirty, err := w.Repo.Changes()
	if err != nil {
		return nil, err
	}
	for _, c := range dirty {
		if c.Path == settings {
			return nil, fmt.Errorf("%s has uncommitted changes; commit or discard them before moving the pin (the pin commit holds that file alone)", settings)
		}
	}

	// What the move deploys, before anything is written.
	if m.Old != "" {
		m.Report, err = drift.Git(ctx, drift.Options{
			Repo: w.Repo, Env: w.Env.Name, Pin: m.Old, Head: target.Hash,
			PolicyDir: w.Env.Policy, EnvDir: w.Env.Dir(),
			RenderAt: w.RenderAt,
			Sides:    PinSides,
			MaxBlame: -1,
		})
		switch {
		case drift.IsUnknownRevision(err):
			m.Report, m.OldUnknown = nil, true
		case err != nil:
			return nil, fmt.Errorf("comparing the old pin with %s: %w", target.Short(), err)
		}
	}

	path := w.abs(settings)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	nb, err := SetPin(b, target.Hash)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(path, nb, 0o644); err != nil {
		return nil, err
	}
	from := "unpinned"
	if m.Old != "" {
		from = gitrepo.Short(m.Old)
	}
	msg := fmt.Sprintf("%s: pin %s to %s\n\nMoved from %s by gpupolicy pin --env %s %s.\nPinned commit: %s %s",
		settings, w.Env.Name, target.Short(), from, w.Env.Name, rev, target.Hash, target.Subject)
	if m.Commit, err = w.Repo.CommitOnly(msg, settings); err != nil {
		// Leave the file as it was: the pin did not move.
		_ = atomicfile.WriteFile(path, b, 0o644)
		return nil, err
	}
	return m, nil
}
