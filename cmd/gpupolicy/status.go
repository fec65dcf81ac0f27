package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/output"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/internal/status"
	"github.com/gpupolicy/gpupolicy/verify"
)

func init() { commands = append(commands, newStatusCmd) }

type statusFlags struct {
	env, policyDir string
	cluster        clusterFlags
	watch          bool
	interval       time.Duration
	format         *output.Flag
}

func newStatusCmd() *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status --env ENV [--watch] [-o text|json|yaml|markdown]",
		Short: "Why each GPU job waits, and until when: the live answer in the lab's terms",
		Long: `status reads the environment's cluster (get and list only) and says, for each
waiting GPU job, where it waits and what frees it:

  at an Argo lock   which Workflows hold the slots, and whether Kueue holds
                    their pods (lock-capacity: a lock larger than what the
                    queue admits is held by jobs that do not run), or
                    next-in-line behind running jobs;
  in Kueue          next-in-line when only running jobs of its own queue,
                    within its quota, are ahead of it (it starts when the
                    first of them ends); otherwise quota: the binding
                    resource (shares, host memory, declared GPU memory), who
                    holds it (the 7B's borrowed 12,200 MiB), and whether a
                    preemption path applies at the job's priority;
  on a node         Kueue admitted it, the scheduler finds no room (and why);

and until when: a running job's time limit, an on-demand service's idle
scale-down at a clock time (and "indefinitely while requests keep
arriving": a job Kueue holds never starts its time limit), or indefinitely.
It compares the jobs running now with explain's prediction for the service
state read from the cluster ("running 4 of a predicted 4"), and shows the
cluster at a glance: quota in use per queue and card, the services up, the
lock slots held.

The policy is the one at the environment's pin (what the cluster runs);
--policy overrides it. An on-demand service's last request is read where
the service's lastActivity in the policy says (an annotation or label its
idle scaler writes on its pod or Deployment); without it status says "last
activity unknown: the policy does not say where to read it" and counts
the scale-down from when the service came up.

--watch refreshes every --interval: in place on a terminal, and as lines of
what changed otherwise (for logs).

Exit 0 when nothing waits longer than the policy predicts, 1 when a job is
starved or stuck beyond what the policy predicts, 2 on a usage error or an
unreachable cluster.`,
		Example: `  gpupolicy status --env local
  gpupolicy status --env lab -o json | jq '.waiting[] | {workflow, reason, until: .until.words}'
  gpupolicy status --env lab --watch --interval 10s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runStatus(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.env, "env", "", "the environment (environments/ENV): its policy, pin, kubeconfig and context")
	f.cluster.add(cmd)
	fl.StringVar(&f.policyDir, "policy", "", "policy directory (default: the environment's policy at its pin)")
	fl.BoolVar(&f.watch, "watch", false, "refresh until interrupted")
	fl.DurationVar(&f.interval, "interval", 5*time.Second, "with --watch: how often to read the cluster")
	f.format = outputFlag(cmd, output.Text, status.Formats...)
	return cmd
}

func runStatus(cmd *cobra.Command, f statusFlags) error {
	if f.env == "" {
		return usageError{errors.New("--env ENV is required")}
	}
	if f.interval <= 0 {
		return usageError{errors.New("--interval must be positive")}
	}
	t, err := openEnv(f.env, false)
	if err != nil {
		return err
	}
	p, pin, err := statusPolicy(t, f.policyDir)
	if err != nil {
		return err
	}
	// A lock sized from quota holds the size the render gave it.
	if p, _, err = admission.SizeLocks(p); err != nil {
		return err
	}
	c, where, err := f.cluster.clients(t)
	if err != nil {
		return fmt.Errorf("environment %s: %w", f.env, err)
	}
	predict, err := verify.AdmissionPredictor(p)
	if err != nil {
		return err
	}
	in := status.Input{Policy: p, Environment: f.env, Pin: pin, Predict: predict}
	clients := status.Clients{Dynamic: c.Dynamic, REST: c.REST}
	once := func() (*status.Report, error) {
		obs, err := status.Read(cmd.Context(), clients, p)
		if err != nil {
			return nil, fmt.Errorf("environment %s at %s: %w", f.env, where, err)
		}
		return status.Analyze(in, obs), nil
	}
	if !f.watch {
		r, err := once()
		if err != nil {
			return err
		}
		if err := r.Write(cmd.OutOrStdout(), f.format.Format()); err != nil {
			return err
		}
		return statusExit(r)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := cmd.OutOrStdout()
	tty := isTerminal(out) && f.format.Format() == output.Text
	var last *status.Report
	prev := map[string]string{}
	for {
		r, err := once()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		last = r
		if tty {
			fmt.Fprint(out, "\033[H\033[2J")
			if err := r.Write(out, output.Text); err != nil {
				return err
			}
		} else if f.format.Format() == output.Text {
			prev = status.WriteChanges(out, prev, r)
		} else if err := r.Write(out, f.format.Format()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(f.interval):
			continue
		}
		break
	}
	if last == nil {
		return nil
	}
	return statusExit(last)
}

// statusPolicy is the policy the cluster runs: the environment's at its pin
// (the worktree's when there is no pin or no git), or --policy.
func statusPolicy(t *envTarget, dir string) (*policy.Policy, string, error) {
	if dir != "" {
		p, err := policy.Load(dir)
		return p, "", err
	}
	if t.Repo != nil && t.Env.Pin != "" {
		commit, err := t.Repo.Resolve(t.Env.Pin)
		if err != nil {
			return nil, "", fmt.Errorf("environment %s: the pin %s: %w", t.Env.Name, t.Env.Pin, err)
		}
		p, err := environment.PolicyAt(t.Repo, commit.Hash, t.Env.Policy)
		if err != nil {
			return nil, "", fmt.Errorf("the policy at the pin %.12s: %w", commit.Hash, err)
		}
		return p, commit.Hash, nil
	}
	p, err := policy.Load(t.Path(t.Env.Policy))
	return p, "", err
}

func statusExit(r *status.Report) error {
	if r.IsStuck() {
		return findingsError{fmt.Sprintf("status: %d job(s) starved or stuck beyond what the policy predicts", r.Stuck)}
	}
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
