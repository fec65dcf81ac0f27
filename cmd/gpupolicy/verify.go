package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/output"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/verify"
)

func init() { commands = append(commands, newVerifyCmd) }

type verifyFlags struct {
	env, policyDir           string
	cluster                  clusterFlags
	levels                   string
	batches                  int
	hold, timeout            time.Duration
	starveWatch, cancelGrace time.Duration
	cancel, noGPUMemory      bool
	reportDir                string
	format                   *output.Flag
}

func newVerifyCmd() *cobra.Command {
	var f verifyFlags
	cmd := &cobra.Command{
		Use:   "verify --env ENV [flags]",
		Short: "Run the GPU test job through the deployed template and check the cluster admits what the policy predicts",
		Long: `verify is the post-deploy check. It submits the GPU test job (a 4096×4096
matrix multiply and a tiny language model, each checked against a CPU
reference, then the GPU held idle for --hold) as Argo Workflows through the
environment's cache-free GPU step WorkflowTemplate (gpu-step-no-cache in the
lab), each job its own Workflow, at the ladder's lowest priority (batch),
which never preempts anyone. For each level n of --levels it submits n jobs
together, --batches times, waiting for each batch to finish; with --cancel it
then stops one running job of a batch of (predicted + 1) through the
Workflow's spec.shutdown and times the cancel and the hand-off to the next.

It reads when each job was submitted, got the lock (its pod appeared), was
admitted by Kueue (its Workload's QuotaReserved), started (the job's own start
stamp from its log, else its container's start) and ended, and compares that
with the admission model (what gpupolicy explain prints) for the service
state read from the cluster: an on-demand service is up when a Kueue
Workload in its namespace holds quota in its ClusterQueue. Disagreements fail
the run: more at once than predicted, a job beyond the count that did not
wait for one to end, fewer at once than predicted, any admission where none
is predicted (for instance batch jobs while the 7B is up: verify then watches
one batch wait for --starve-watch and reports the starvation explain
predicted), a failed job or a failed GPU check.

The report gives the completion rate per level (jobs/min) against one lone
job's rate × n, the median gap between one job's end and the next one's
start, the concurrency reached, the cancel timings, per-job stamps and GPU
memory (sampled through NVML on this machine when the driver is present).
--report DIR writes report.md, report.json and timeline.svg (a bar per job,
waiting and running). Progress goes to stderr.

Everything verify creates carries the label gpupolicy.dev/verify-run=<id> and
is deleted at the end, also on Ctrl-C and on timeout.

On the local cluster (environments/local) pods run on a KWOK-simulated GPU
node for --hold (the annotation gpupolicy.dev/run-seconds); there are no
logs, so start and end come from container status.

Rules (ID, severity, reason):
` + finding.Help(finding.Rules(finding.Verify)) + `

Exit 0 when the cluster admitted what the policy predicts, 1 on a
disagreement, 2 on a usage error, an unreachable cluster, or an interrupt.`,
		Example: `  gpupolicy verify --env local --levels 1,2,3,4,5 --batches 3 --hold 60s --report out/verify
  gpupolicy verify --env lab --levels 4 --batches 1 --hold 30s --cancel -o markdown
  gpupolicy verify --env lab --kubeconfig ~/.kube/lab --context lab-admin --levels 1-5

  # In a post-deploy CI job: the report as a build artifact, the job failing on exit 1
  gpupolicy verify --env lab --levels 1,4 --batches 1 --hold 30s --report out/verify -o markdown`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runVerify(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.env, "env", "", "the environment (environments/ENV): its policy, kubeconfig and context")
	f.cluster.add(cmd)
	fl.StringVar(&f.policyDir, "policy", "", "policy directory (default: the environment's)")
	fl.StringVar(&f.levels, "levels", "1,2,3,4,5", "how many jobs to submit together, e.g. 1,2,3,4,5 or 1-5")
	fl.IntVar(&f.batches, "batches", 3, "batches per level")
	fl.DurationVar(&f.hold, "hold", 60*time.Second, "how long each job holds the GPU idle after its work")
	fl.BoolVar(&f.cancel, "cancel", false, "also cancel one running job and time the cancel and the hand-off")
	fl.DurationVar(&f.timeout, "timeout", 0, "bound on the whole run (default: from the levels, batches and hold)")
	fl.DurationVar(&f.starveWatch, "starve-watch", 0, "how long to watch jobs the policy admits none of (default max(60s, 2×hold))")
	fl.DurationVar(&f.cancelGrace, "cancel-grace", verify.DefaultCancelGrace, "with --cancel: delete the job's pod if it still runs this long after the stop request")
	fl.BoolVar(&f.noGPUMemory, "no-gpu-memory", false, "do not sample GPU memory through NVML")
	fl.StringVar(&f.reportDir, "report", "", "write report.md (linking the charts), report.json, timeline.svg, rates.svg and handoff.svg into DIR")
	f.format = outputFlag(cmd, output.Text, verify.Formats...)
	return cmd
}

func runVerify(cmd *cobra.Command, f verifyFlags) error {
	if f.env == "" {
		return usageError{errors.New("--env ENV is required")}
	}
	levels, err := parseLevels(f.levels)
	if err != nil {
		return usageError{err}
	}
	if f.batches < 1 {
		return usageError{fmt.Errorf("--batches %d: at least 1", f.batches)}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--hold", f.hold}, {"--timeout", f.timeout}, {"--starve-watch", f.starveWatch}, {"--cancel-grace", f.cancelGrace}} {
		if d.v < 0 {
			return usageError{fmt.Errorf("%s %s: a duration must not be negative", d.flag, d.v)}
		}
	}
	t, err := openEnv(f.env, false)
	if err != nil {
		return err
	}
	policyDir := f.policyDir
	if policyDir == "" {
		policyDir = t.Path(t.Env.Policy)
	}
	p, err := policy.Load(policyDir)
	if err != nil {
		return err
	}
	kubeconfig := f.cluster.kubeconfig
	if kubeconfig == "" && t.Env.Kubeconfig != "" {
		kubeconfig = filepath.Join(t.Root, filepath.FromSlash(t.Env.Kubeconfig))
	}
	if kubeconfig != "" {
		if _, err := os.Stat(kubeconfig); err != nil {
			return fmt.Errorf("environment %s: kubeconfig %s: %w (for the local cluster: make cluster-up)", f.env, kubeconfig, err)
		}
	}
	kc, where, err := f.cluster.clients(t)
	if err != nil {
		return fmt.Errorf("environment %s: %w", f.env, err)
	}
	predict, err := verify.AdmissionPredictor(p)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(cmd.ErrOrStderr(), "verify: environment %s at %s\n", f.env, where)
	rep, runErr := verify.Run(ctx, verify.Clients{Kube: kc.Kube, Dynamic: kc.Dynamic}, verify.Options{
		Policy: p, Environment: f.env, Levels: levels, Batches: f.batches, Hold: f.hold,
		Cancel: f.cancel, CancelGrace: f.cancelGrace, StarveWatch: f.starveWatch, Timeout: f.timeout,
		Progress: cmd.ErrOrStderr(), Predict: predict, NoGPUMemory: f.noGPUMemory,
	})
	if rep == nil {
		return runErr
	}
	if f.reportDir != "" {
		if err := verify.WriteDir(f.reportDir, rep); err != nil {
			return errors.Join(runErr, fmt.Errorf("writing the report: %w", err))
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "verify: wrote %s\n", strings.Join([]string{
			filepath.Join(f.reportDir, "report.md"), filepath.Join(f.reportDir, "report.json"), filepath.Join(f.reportDir, verify.FileTimeline), filepath.Join(f.reportDir, verify.FileRates), filepath.Join(f.reportDir, verify.FileHandoff)}, ", "))
	}
	if err := rep.Write(cmd.OutOrStdout(), f.format.Format()); err != nil {
		return errors.Join(runErr, err)
	}
	if runErr != nil {
		return runErr
	}
	if !rep.OK() {
		return findingsError{fmt.Sprintf("verify: %d disagreement(s) with the policy on environment %s", len(rep.Findings), f.env)}
	}
	return nil
}

// parseLevels reads "1,2,3,4,5", "1-5" or a mix ("1-3,5").
func parseLevels(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			return nil, fmt.Errorf("--levels %q: %q is not a number of jobs", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return nil, fmt.Errorf("--levels %q: bad range %q", s, part)
			}
		}
		for n := a; n <= b; n++ {
			if n < 1 || n > 64 {
				return nil, fmt.Errorf("--levels %q: %d jobs together: use 1 to 64", s, n)
			}
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--levels %q: no level", s)
	}
	return out, nil
}
