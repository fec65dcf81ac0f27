package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

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

It then prints what the move deploys: every difference between the render
at the old pin and the render at the new one, with what it changes for the
lab (a GPU-memory declaration that starts to count, a lock that grows).

Exit 0 when pinned (or already pinned there), 2 on a bad revision or an
environment.yaml with uncommitted changes.`,
		Example: `  gpupolicy pin --env lab          # pin lab to HEAD
  gpupolicy pin --env lab v2026.11 # or a tag, a branch, a SHA`,
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
	settings := t.env.SettingsPath()
	target, err := t.repo.Resolve(rev)
	if err != nil {
		return err
	}
	old := t.env.Pin
	if old == target.Hash {
		fmt.Fprintf(out, "%s is already pinned to %s\n", name, target)
		return nil
	}
	dirty, err := t.repo.Changes()
	if err != nil {
		return err
	}
	for _, c := range dirty {
		if c.Path == settings {
			return fmt.Errorf("%s has uncommitted changes; commit or discard them before moving the pin (the pin commit holds that file alone)", settings)
		}
	}

	// What the move deploys, before anything is written.
	var report *drift.Report
	var oldErr error
	if old != "" {
		report, oldErr = drift.Git(ctx, drift.Options{
			Repo: t.repo, Env: name, Pin: old, Head: target.Hash,
			PolicyDir: t.env.Policy, EnvDir: t.env.Dir(),
			RenderAt: renderAtFunc(t),
			Sides:    pinSides,
			MaxBlame: -1,
		})
		if oldErr != nil && !drift.IsUnknownRevision(oldErr) {
			return fmt.Errorf("comparing the old pin with %s: %w", target.Short(), oldErr)
		}
	}

	path := filepath.Join(t.root, filepath.FromSlash(settings))
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	nb, err := environment.SetPin(b, target.Hash)
	if err != nil {
		return err
	}
	if err := pinWriteFile(path, nb); err != nil {
		return err
	}
	from := "unpinned"
	if old != "" {
		from = gitrepo.Short(old)
	}
	msg := fmt.Sprintf("%s: pin %s to %s\n\nMoved from %s by gpupolicy pin --env %s %s.\nPinned commit: %s %s",
		settings, name, target.Short(), from, name, rev, target.Hash, target.Subject)
	c, err := t.repo.CommitOnly(msg, settings)
	if err != nil {
		// Leave the file as it was: the pin did not move.
		_ = pinWriteFile(path, b)
		return err
	}
	fmt.Fprintf(out, "pinned %s to %s (was %s) in commit %s\n", name, target, from, c.Short())

	switch {
	case old == "":
		fmt.Fprintf(out, "\nfirst pin: %s now deploys everything in its render at %s\n", name, target.Short())
	case oldErr != nil:
		fmt.Fprintf(out, "\nthe old pin %s names no commit in this repository; nothing to compare with\n", old)
	case !report.Drifted():
		fmt.Fprintf(out, "\nthe move deploys nothing new: the render at %s matches the render at %s\n", gitrepo.Short(old), target.Short())
	default:
		fmt.Fprintf(out, "\nwhat the move deploys (%s → %s, %s):\n\n", gitrepo.Short(old), target.Short(), envPlural(len(report.Differences), "difference"))
		drift.WriteText(out, report.Differences, pinSides, false)
	}
	return nil
}

var pinSides = drift.Sides{From: "the old pin", To: "the new pin"}

func envPlural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// renderAtFunc renders the target environment at a commit from git
// objects, for commits without deploy/ENV.
func renderAtFunc(t *envTarget) drift.RenderAtFunc {
	return func(commit string) (map[string][]byte, string, error) {
		return environment.RenderAt(t.repo, commit, t.env.Name, t.env)
	}
}

// pinWriteFile replaces a file through a temporary sibling and rename.
func pinWriteFile(path string, b []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
