package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
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
environments/ENV/kustomization.yaml (built in-process, from the
environment's own files only: an overlay that names a git repository or a
URL is an input error naming its file and line), into deploy/ENV, the
directory the environment's cluster syncs at its pin. --check writes
nothing and exits 1 when deploy/ENV on disk is stale, naming each file
added, removed or changed and what changes in it (for CI on pull requests).
--commit writes deploy/ENV and commits it, and nothing else, with git; it
refuses, before writing, when other tracked files (or untracked files in
the policy or the environment) have uncommitted changes, since the render
would then match no commit, and it never overwrites uncommitted edits in
deploy/ENV. When environment.yaml names a GitOps engine, render --env also
writes the engine's objects for the current pin into environments/ENV/gitops
(--check checks them, --commit commits them); gpupolicy pin rewrites them.`
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
type envTarget = environment.Workspace

func openEnv(name string, needGit bool) (*envTarget, error) {
	if err := environment.CheckName(name); err != nil {
		return nil, usageError{err}
	}
	return environment.Open(".", name, needGit)
}

func runRenderEnv(out io.Writer, f renderEnvFlags) error {
	t, err := openEnv(f.env, f.commit)
	if err != nil {
		return err
	}
	deploy := t.Env.DeployDir()
	if f.commit {
		// Refuse before anything is written: a render of uncommitted
		// policy would match no commit.
		if err := t.CheckCommittable(); err != nil {
			return err
		}
	}
	files, err := t.RenderWorktree()
	if err != nil {
		return err
	}
	if f.check {
		c, err := t.CheckDeploy(files)
		if err != nil {
			return err
		}
		c.Text(out)
		if c.Stale() {
			return findingsError{fmt.Sprintf("%s is stale: run gpupolicy render --env %s and commit it", deploy, f.env)}
		}
		return nil
	}
	if f.commit {
		if err := t.CheckHandEdits(files); err != nil {
			return err
		}
	}
	if err := t.WriteDeploy(files); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s: %d objects for environment %s (%s through %s)\n",
		t.Path(deploy), len(files)-1, f.env, t.Env.Policy, t.Env.Dir())
	if ref := t.Env.Engine(); ref.Engine != environment.EngineNone {
		if t.Env.Pin == "" {
			fmt.Fprintf(out, "no %s objects yet: %s has no pin (gpupolicy pin --env %s writes them)\n", ref.Engine, f.env, f.env)
		} else {
			fmt.Fprintf(out, "wrote %s: the %s objects that sync %s at the pin %s\n",
				t.Path(t.Env.GitOpsDir()), ref.Engine, deploy, gitrepo.Short(t.Env.Pin))
		}
	}
	if !f.commit {
		return nil
	}
	c, err := t.CommitDeploy()
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
