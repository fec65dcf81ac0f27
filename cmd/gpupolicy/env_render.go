package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render"
)

// withRenderEnv adds --env, --check and --commit to the render command:
// with --env the command renders an environment into deploy/ENV instead
// of its usual output. policy_render.go calls it on its command.
func withRenderEnv(cmd *cobra.Command) *cobra.Command {
	var f renderEnvFlags
	cmd.Flags().StringVar(&f.env, "env", "", "render environment ENV (environments/ENV) into deploy/ENV: the policy it names, through its kustomize overlay")
	cmd.Flags().BoolVar(&f.check, "check", false, "with --env: write nothing; exit 1 when the committed deploy/ENV is stale, naming the files (for CI)")
	cmd.Flags().BoolVar(&f.commit, "commit", false, "with --env: commit deploy/ENV, and nothing else, with git; refuses when other tracked files have uncommitted changes")
	inner := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if f.env == "" {
			if f.check || f.commit {
				return usageError{errors.New("--check and --commit need --env ENV")}
			}
			return inner(c, args)
		}
		if len(args) > 0 {
			return usageError{fmt.Errorf("--env %s renders the policy the environment names (environments/%s/environment.yaml); drop the POLICY_DIR argument %q", f.env, f.env, args[0])}
		}
		if o := c.Flags().Lookup("out"); o != nil && o.Changed {
			return usageError{fmt.Errorf("--env %s writes %s; drop --out", f.env, environment.DeployDir(f.env))}
		}
		if f.check && f.commit {
			return usageError{errors.New("--check and --commit do not go together")}
		}
		return runRenderEnv(c.OutOrStdout(), f)
	}
	cmd.Long = strings.TrimRight(cmd.Long, "\n") + `

With --env ENV, render renders environment ENV instead: the policy named by
environments/ENV/environment.yaml, through the kustomize overlay in
environments/ENV/kustomization.yaml (built in-process), into deploy/ENV,
the directory the environment's cluster syncs at its pin. --check writes
nothing and exits 1 when deploy/ENV on disk is stale, naming each file
added, removed or changed and what changes in it (for CI on pull requests).
--commit writes deploy/ENV and commits it, and nothing else, with git; it
refuses, before writing, when other tracked files (or untracked files in
the policy or the environment) have uncommitted changes, since the render
would then match no commit, and it never overwrites uncommitted edits in
deploy/ENV.`
	cmd.Example = strings.TrimRight(cmd.Example, "\n") + `
  gpupolicy render --env lab            # write deploy/lab
  gpupolicy render --env lab --check    # CI: exit 1 if deploy/lab is stale
  gpupolicy render --env lab --commit   # write and commit deploy/lab`
	return cmd
}

type renderEnvFlags struct {
	env           string
	check, commit bool
}

// envTarget is an environment of the repository around the current
// directory.
type envTarget struct {
	// repo is nil outside a git repository (only a plain render works then).
	repo *gitrepo.Repo
	// root is the repository root (the current directory outside git).
	root string
	env  *environment.Environment
}

func openEnv(name string, needGit bool) (*envTarget, error) {
	if err := environment.CheckName(name); err != nil {
		return nil, usageError{err}
	}
	t := &envTarget{}
	repo, err := gitrepo.Open(".")
	switch {
	case err == nil:
		t.repo, t.root = repo, repo.Root
	case needGit:
		return nil, err
	default:
		if t.root, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	t.env, err = environment.Load(t.root, name)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// show turns a root-relative path into one relative to the current
// directory (absolute when that fails), for loading and for messages.
func (t *envTarget) show(p string) string {
	abs := filepath.Join(t.root, filepath.FromSlash(p))
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, abs); err == nil {
			return r
		}
	}
	return abs
}

// renderWorktree renders the environment from the policy in the working
// tree.
func (t *envTarget) renderWorktree() (map[string][]byte, error) {
	p, err := policy.Load(t.show(t.env.Policy))
	if err != nil {
		return nil, err
	}
	return t.env.Render(p)
}

func runRenderEnv(out io.Writer, f renderEnvFlags) error {
	t, err := openEnv(f.env, f.commit)
	if err != nil {
		return err
	}
	deploy := t.env.DeployDir()
	dir := filepath.Join(t.root, filepath.FromSlash(deploy))

	if f.commit {
		// Refuse before anything is written: a render of uncommitted
		// policy would match no commit.
		if err := t.checkCommittable(); err != nil {
			return err
		}
	}
	files, err := t.renderWorktree()
	if err != nil {
		return err
	}
	if f.check {
		return checkRender(out, t, files)
	}
	if f.commit {
		if err := t.checkHandEdits(files); err != nil {
			return err
		}
	}
	if err := render.Write(dir, files); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s: %d objects for environment %s (%s through %s)\n",
		t.show(deploy), len(files)-1, f.env, t.env.Policy, t.env.Dir())
	if !f.commit {
		return nil
	}
	head, err := t.repo.Head()
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("%s: render %s for %s\n\nRendered by gpupolicy render --env %s --commit from %s at %s.",
		deploy, t.env.Policy, f.env, f.env, t.env.Policy, head.Short())
	c, err := t.repo.CommitOnly(msg, deploy)
	if errors.Is(err, gitrepo.ErrNothingToCommit) {
		fmt.Fprintf(out, "%s is already committed as rendered; nothing to commit\n", deploy)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "committed %s as %s\n", deploy, c)
	return nil
}

// checkCommittable refuses a commit when the render would not match HEAD:
// tracked files outside deploy/ENV with uncommitted changes, or untracked
// files in the policy or the environment's directory.
func (t *envTarget) checkCommittable() error {
	changes, err := t.repo.Changes()
	if err != nil {
		return err
	}
	var dirty []string
	for _, c := range changes {
		switch {
		case gitrepo.Under(c.Path, t.env.DeployDir()):
		case c.Untracked && gitrepo.Under(c.Path, t.env.Policy, t.env.Dir()):
			dirty = append(dirty, c.Path+" (untracked)")
		case !c.Untracked:
			dirty = append(dirty, c.Path)
		}
	}
	if len(dirty) == 0 {
		return nil
	}
	return fmt.Errorf("refusing to commit %s: these files have uncommitted changes, so the render would match no commit:\n  %s\ncommit or stash them first; nothing was written",
		t.env.DeployDir(), strings.Join(dirty, "\n  "))
}

// checkHandEdits refuses to overwrite uncommitted edits in deploy/ENV that
// the new render would not reproduce.
func (t *envTarget) checkHandEdits(files map[string][]byte) error {
	changes, err := t.repo.Changes()
	if err != nil {
		return err
	}
	var lost []string
	for _, c := range changes {
		if !gitrepo.Under(c.Path, t.env.DeployDir()) {
			continue
		}
		name := strings.TrimPrefix(c.Path, t.env.DeployDir()+"/")
		disk, err := os.ReadFile(filepath.Join(t.root, filepath.FromSlash(c.Path)))
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
		t.env.DeployDir(), strings.Join(lost, "\n  "), t.env.Dir())
}

// checkRender compares a fresh render with deploy/ENV on disk.
func checkRender(out io.Writer, t *envTarget, files map[string][]byte) error {
	deploy := t.env.DeployDir()
	dir := filepath.Join(t.root, filepath.FromSlash(deploy))
	disk := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		disk[e.Name()] = b
	}
	var lines []string
	names := map[string]bool{}
	for n := range files {
		names[n] = true
	}
	for n := range disk {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		want, inRender := files[n]
		have, inDeploy := disk[n]
		switch {
		case inRender && !inDeploy:
			lines = append(lines, "  added:   "+n)
		case !inRender && inDeploy:
			lines = append(lines, "  removed: "+n)
		case !bytes.Equal(want, have):
			lines = append(lines, "  changed: "+n)
		}
	}
	if len(lines) == 0 {
		fmt.Fprintf(out, "%s is up to date (%d files)\n", t.show(deploy), len(files))
		return nil
	}
	if len(disk) == 0 {
		fmt.Fprintf(out, "%s has no render; rendering would add %d files\n", t.show(deploy), len(files))
	} else {
		fmt.Fprintf(out, "%s is stale: rendering %s for %s would change %d file(s):\n%s\n",
			t.show(deploy), t.env.Policy, t.env.Name, len(lines), strings.Join(lines, "\n"))
		// What the files' differences mean, object by object.
		if from, err := drift.Parse(disk); err == nil {
			if to, err := drift.Parse(files); err == nil {
				ds := drift.Compare(from, to)
				sides := drift.Sides{From: deploy, To: "the render"}
				drift.Explain(ds, from, to, sides)
				if len(ds) > 0 {
					fmt.Fprintln(out)
					drift.WriteText(out, ds, sides, false)
				}
			}
		}
	}
	return findingsError{fmt.Sprintf("%s is stale: run gpupolicy render --env %s and commit it", deploy, t.env.Name)}
}
