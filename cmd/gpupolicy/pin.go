package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
)

func init() { commands = append(commands, newPinCmd) }

func newPinCmd() *cobra.Command {
	var env string
	cmd := &cobra.Command{
		Use:   "pin --env ENV [REV]",
		Short: "Move an environment's pin to a commit, and print what the move deploys",
		Long: `pin moves environment ENV's pin (the commit its cluster syncs deploy/ENV
from) to REV: a full or abbreviated SHA, a branch, a tag, or HEAD (the
default). It writes the full SHA into environments/ENV/environment.yaml and
commits that file alone with git; other uncommitted work is left as it is.
When environment.yaml names a GitOps engine (gitops.engine: flux or
argocd), the engine's objects in environments/ENV/gitops (a Flux
GitRepository and Kustomization, or an Argo CD Application) are rewritten
for the new pin and go in the same commit.

It then prints what the move deploys: every difference between the render
at the old pin and the render at the new one, with what it changes for the
lab (a GPU-memory declaration that starts to count, a lock that grows).

Exit 0 when pinned (or already pinned there), 2 on a bad revision or an
environment.yaml with uncommitted changes.`,
		Example: `  gpupolicy pin --env lab          # pin lab to HEAD
  gpupolicy pin --env lab v2026.11 # or a tag, a branch, a SHA

  # In a release job: pin the merged commit, then push the pin's commit
  gpupolicy pin --env lab "$GITHUB_SHA" && git push origin HEAD`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if env == "" {
				return usageError{errors.New("--env ENV is required")}
			}
			rev := "HEAD"
			if len(args) == 1 {
				rev = args[0]
			}
			return runPin(cmd.Context(), cmd.OutOrStdout(), env, rev)
		},
	}
	cmd.Flags().StringVar(&env, "env", "", "the environment to pin (environments/ENV)")
	return cmd
}

func runPin(ctx context.Context, out io.Writer, name, rev string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	t, err := openEnv(name, true)
	if err != nil {
		return err
	}
	m, err := t.MovePin(ctx, rev)
	if err != nil {
		return err
	}
	if m.Already {
		fmt.Fprintf(out, "%s is already pinned to %s\n", name, m.Target)
		return nil
	}
	from := "unpinned"
	if m.Old != "" {
		from = gitrepo.Short(m.Old)
	}
	fmt.Fprintf(out, "pinned %s to %s (was %s) in commit %s\n", name, m.Target, from, m.Commit.Short())
	if len(m.GitOps) > 0 {
		fmt.Fprintf(out, "the %s objects in %s now sync %s at %s (same commit)\n",
			t.Env.Engine().Engine, t.Env.GitOpsDir(), t.Env.DeployDir(), m.Target.Short())
	}

	switch {
	case m.Old == "":
		fmt.Fprintf(out, "\nfirst pin: %s now deploys everything in its render at %s\n", name, m.Target.Short())
	case m.OldUnknown:
		fmt.Fprintf(out, "\nthe old pin %s names no commit in this repository; nothing to compare with\n", m.Old)
	case !m.Report.Drifted():
		fmt.Fprintf(out, "\nthe move deploys nothing new: the render at %s matches the render at %s\n", gitrepo.Short(m.Old), m.Target.Short())
	default:
		fmt.Fprintf(out, "\nwhat the move deploys (%s → %s, %s):\n\n", gitrepo.Short(m.Old), m.Target.Short(), envPlural(len(m.Report.Differences), "difference"))
		drift.WriteText(out, m.Report.Differences, environment.PinSides, false)
	}
	return nil
}

func envPlural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
