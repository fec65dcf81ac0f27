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

// WriteDeploy replaces deploy/ENV with files, atomically (render.Write),
// and environments/ENV/gitops with the engine objects for the current pin
// (WriteGitOps).
func (w *Workspace) WriteDeploy(files map[string][]byte) error {
	if _, err := render.Write(w.abs(w.Env.DeployDir()), files); err != nil {
		return err
	}
	_, err := w.WriteGitOps()
	return err
}

// WriteGitOps replaces environments/ENV/gitops with the engine objects
// for the environment's pin (GitOpsFiles), atomically; with no engine (or
// no pin yet) it removes a previously generated directory. It returns the
// files written.
func (w *Workspace) WriteGitOps() (map[string][]byte, error) {
	files, err := w.Env.GitOpsFiles()
	if err != nil {
		return nil, err
	}
	dir := w.abs(w.Env.GitOpsDir())
	if len(files) > 0 {
		_, err := render.Write(dir, files)
		return files, err
	}
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || !bytes.HasPrefix(b, []byte(render.GeneratedPrefix)) {
			return nil, fmt.Errorf("%s holds %s, which gpupolicy did not generate; the environment names no GitOps engine, so remove the directory by hand", w.Env.GitOpsDir(), e.Name())
		}
	}
	return nil, os.RemoveAll(dir)
}

// readDir reads the plain files of a root-relative directory (none when it
// does not exist).
func (w *Workspace) readDir(p string) (map[string][]byte, error) {
	out := map[string][]byte{}
	entries, err := os.ReadDir(w.abs(p))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(w.abs(p), e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = b
	}
	return out, nil
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
		case gitrepo.Under(c.Path, w.Env.DeployDir(), w.Env.GitOpsDir()):
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
	return w.Repo.CommitOnly(msg, e.DeployDir(), e.GitOpsDir())
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
	// GitOpsDir is environments/ENV/gitops as shown to the user;
	// GitOpsChanges, its files that differ from the engine objects for the
	// pin.
	GitOpsDir     string
	GitOpsChanges []FileDiff
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
	c := &DeployCheck{Env: w.Env, Dir: w.Path(w.Env.DeployDir()), Files: files, GitOpsDir: w.Path(w.Env.GitOpsDir())}
	var err error
	if c.Disk, err = w.readDir(w.Env.DeployDir()); err != nil {
		return nil, err
	}
	c.Changes = fileDiffs(files, c.Disk)
	gitops, err := w.Env.GitOpsFiles()
	if err != nil {
		return nil, err
	}
	disk, err := w.readDir(w.Env.GitOpsDir())
	if err != nil {
		return nil, err
	}
	c.GitOpsChanges = fileDiffs(gitops, disk)
	return c, nil
}

// fileDiffs lists the files that want (generated) adds, removes or changes
// in have (on disk), by name.
func fileDiffs(want, have map[string][]byte) []FileDiff {
	names := map[string]bool{}
	for n := range want {
		names[n] = true
	}
	for n := range have {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var out []FileDiff
	for _, n := range sorted {
		w, inRender := want[n]
		h, inDeploy := have[n]
		switch {
		case inRender && !inDeploy:
			out = append(out, FileDiff{n, drift.Added})
		case !inRender && inDeploy:
			out = append(out, FileDiff{n, drift.Removed})
		case !bytes.Equal(w, h):
			out = append(out, FileDiff{n, drift.Changed})
		}
	}
	return out
}

// Stale reports whether deploy/ENV, or the engine objects, differ from the
// render.
func (c *DeployCheck) Stale() bool { return len(c.Changes) > 0 || len(c.GitOpsChanges) > 0 }

// Text prints the check: up to date, or each file that differs and what
// the differences mean, object by object.
func (c *DeployCheck) Text(out io.Writer) {
	if len(c.GitOpsChanges) > 0 {
		lines := make([]string, len(c.GitOpsChanges))
		for i, f := range c.GitOpsChanges {
			lines[i] = fmt.Sprintf("  %-8s %s", string(f.Change)+":", f.Name)
		}
		fmt.Fprintf(out, "%s is stale: the %s objects for the pin would change %d file(s):\n%s\n",
			c.GitOpsDir, c.Env.Engine().Engine, len(lines), strings.Join(lines, "\n"))
	}
	if len(c.Changes) == 0 {
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

// CompareWithPin compares the render at rev (a commit a GitOps engine
// synced) with the render at the pin, as drift compares the pin with HEAD:
// what the cluster running rev lacks of the pin.
func (w *Workspace) CompareWithPin(ctx context.Context, rev string, sides drift.Sides) (*drift.Report, error) {
	return drift.Git(ctx, drift.Options{
		Repo: w.Repo, Env: w.Env.Name, Pin: rev, Head: w.Env.Pin,
		PolicyDir: w.Env.Policy, EnvDir: w.Env.Dir(),
		RenderAt: w.RenderAt,
		Sides:    sides,
		MaxBlame: -1,
	})
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
	// GitOps are the engine objects written for the new pin (in
	// environments/ENV/gitops, in the same commit); nil without an engine.
	GitOps map[string][]byte
}

// MovePin moves the environment's pin to rev (a SHA, branch, tag or HEAD):
// it writes the full SHA into environment.yaml, atomically, and commits that
// file alone; other uncommitted work is left as it is. It refuses when
// environment.yaml has uncommitted changes. What the move deploys is
// compared before anything is written; if the commit fails the file is put
// back. When the environment names a GitOps engine, its objects
// (environments/ENV/gitops) are rewritten for the new pin and committed with
// environment.yaml.
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
		if gitrepo.Under(c.Path, w.Env.GitOpsDir()) {
			return nil, fmt.Errorf("%s has uncommitted changes; discard them before moving the pin (the pin commit rewrites that directory)", c.Path)
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
	// The engine objects carry the pin: rewrite them for the new one, to
	// go in the same commit.
	moved := *w.Env
	moved.Pin = target.Hash
	if _, err := moved.GitOpsFiles(); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(path, nb, 0o644); err != nil {
		return nil, err
	}
	mw := &Workspace{Repo: w.Repo, Root: w.Root, Env: &moved}
	if m.GitOps, err = mw.WriteGitOps(); err != nil {
		_ = atomicfile.WriteFile(path, b, 0o644)
		return nil, err
	}
	from := "unpinned"
	if m.Old != "" {
		from = gitrepo.Short(m.Old)
	}
	msg := fmt.Sprintf("%s: pin %s to %s\n\nMoved from %s by gpupolicy pin --env %s %s.\nPinned commit: %s %s",
		settings, w.Env.Name, target.Short(), from, w.Env.Name, rev, target.Hash, target.Subject)
	if m.Commit, err = w.Repo.CommitOnly(msg, settings, w.Env.GitOpsDir()); err != nil {
		// Leave the files as they were: the pin did not move.
		_ = atomicfile.WriteFile(path, b, 0o644)
		_, _ = w.WriteGitOps()
		return nil, err
	}
	w.Env = &moved
	return m, nil
}
