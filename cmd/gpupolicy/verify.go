package main

import (
	"context"
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

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/internal/kube/reconcile"
	"github.com/gpupolicy/gpupolicy/internal/output"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
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
	cancel, faults           bool
	exclusive                bool
	exclusiveTemplate        string
	noGPUMemory              bool
	compareWith              string
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

With --faults it then runs a batch of (predicted + 1) in which one job
crashes mid-run (the test job's --crash-after: exit 1) beside the others,
and, where an earlier job reported a CUDA device, one allocates twice its
GPU-memory declaration beyond it (--allocate-mib; nothing stops it, since a
declaration is accounting only). It reports whether the others finished
with correct outputs, when Kueue freed the crashed job's quota and Argo its
lock slot (where the template takes a lock), and how long the job that took
its place waited. On the local cluster the simulated node ends the crashing
job's container with its exit code, as a kubelet would; it has no GPU, so
the over-allocation is skipped and the report says why.

With --exclusive it then runs an exclusive batch: as many jobs as the
queue admits, and once they run, one job of the policy's exclusive
template (templates.NAME.exclusive; --exclusive-template names one when
there are several) at that template's priority. From the cluster's own
records (every Workload's QuotaReserved and Finished, every GPU pod's
container start and end, in the namespaces of every ClusterQueue with
quota on the card) it checks that nothing held quota or ran beside the
exclusive job, the always-on services aside, and that it evicted the
running jobs or waited for them as the admission model says; the report
names whatever ran beside it.

With --compare-with POLICY it runs the same batches under two policies, one
after the other, and reports them side by side: the rates, the hand-off by
part, and for levels that ran one job at a time where each batch's time
went. POLICY is a policy directory, or a git revision of the environment's
policy directory (a directory of that name wins). The other policy runs
first, then the environment's (--policy or the environment's own). Each
policy's render for the environment is reconciled on the cluster before its
batches (server-side apply, pruning what the environment owns, node
readiness: what reconcile does), and at the end the render at the
environment's pin is put back — also after a failure or Ctrl-C. A deploy or
the restore, once started, runs to its end, so the cluster never holds half
of a render. An environment synced by a GitOps engine is refused: the
engine would put its own render back in the middle of the run.

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
waiting and running), rates.svg and handoff.svg; with --compare-with,
report.md, report.json and handoff.svg (both policies) and each policy's own
report and charts in DIR/1-LABEL and DIR/2-LABEL. Progress goes to stderr.

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

  # A crash beside three others (the lab admits four at once: five submitted)
  gpupolicy verify --env local --levels 1 --batches 1 --hold 10s --faults

  # The vLLM benchmark's exclusive template submitted into four running jobs
  gpupolicy verify --env local --levels 1 --batches 1 --hold 10s --exclusive

  # The series' policy (an Argo lock in front of Kueue) against today's, side by side
  gpupolicy verify --env local --levels 1,4,5 --batches 2 --hold 5s --compare-with 0e2dcdd --report out/compare

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
	fl.BoolVar(&f.faults, "faults", false, "also run a batch in which one job crashes beside the others (and, on a real GPU, one allocates beyond its declaration)")
	fl.BoolVar(&f.exclusive, "exclusive", false, "also submit one job of the policy's exclusive template into a running batch and check nothing ran beside it")
	fl.StringVar(&f.exclusiveTemplate, "exclusive-template", "", "with --exclusive: the exclusive template (default: the policy's only one)")
	fl.StringVar(&f.compareWith, "compare-with", "", "run the same batches under this policy first (a directory, or a git revision of the environment's policy), then the environment's, side by side")
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
	if f.exclusiveTemplate != "" && !f.exclusive {
		return usageError{errors.New("--exclusive-template names the template of --exclusive's batch: give --exclusive too")}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--hold", f.hold}, {"--timeout", f.timeout}, {"--starve-watch", f.starveWatch}, {"--cancel-grace", f.cancelGrace}} {
		if d.v < 0 {
			return usageError{fmt.Errorf("%s %s: a duration must not be negative", d.flag, d.v)}
		}
	}
	t, err := openEnv(f.env, f.compareWith != "")
	if err != nil {
		return err
	}
	policyDir := f.policyDir
	label := f.policyDir
	if policyDir == "" {
		policyDir, label = t.Path(t.Env.Policy), t.Env.Policy
	}
	p, err := policy.Load(policyDir)
	if err != nil {
		return err
	}
	var other *verify.PolicyRun
	if f.compareWith != "" {
		if t.Env.GitOps.Enabled() {
			return usageError{fmt.Errorf("--compare-with: environment %s is synced by %s, which would put its own render back in the middle of the run; compare on a cluster reconcile serves", f.env, t.Env.GitOps.Engine)}
		}
		if other, err = comparedPolicy(t, f.compareWith); err != nil {
			return err
		}
		if other.Label == label {
			other.Label += " (compared)"
		}
	}
	// A lock sized from quota holds the size the render gave it.
	if p, _, err = admission.SizeLocks(p); err != nil {
		return err
	}
	if other != nil {
		if other.Policy, _, err = admission.SizeLocks(other.Policy); err != nil {
			return err
		}
	}
	predict, err := verify.AdmissionPredictor(p)
	if err != nil {
		return err
	}
	opts := verify.Options{
		Policy: p, Environment: f.env, Levels: levels, Batches: f.batches, Hold: f.hold,
		Cancel: f.cancel, Faults: f.faults, CancelGrace: f.cancelGrace, StarveWatch: f.starveWatch, Timeout: f.timeout,
		Exclusive: f.exclusive, ExclusiveTemplate: f.exclusiveTemplate,
		Progress: cmd.ErrOrStderr(), Predict: predict, NoGPUMemory: f.noGPUMemory,
	}
	// The flags against the policy (--exclusive-template's name, ...)
	// before the cluster: a typo is not reported as a missing kubeconfig.
	if err := verify.Check(opts); err != nil {
		if other != nil {
			return fmt.Errorf("verify: policy %s: %w", label, err)
		}
		return err
	}
	if other != nil {
		o := opts
		if o.Predict, err = verify.AdmissionPredictor(other.Policy); err != nil {
			return fmt.Errorf("verify: policy %s: %w", other.Label, err)
		}
		o.Policy = other.Policy
		if err := verify.Check(o); err != nil {
			return fmt.Errorf("verify: policy %s: %w", other.Label, err)
		}
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

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(cmd.ErrOrStderr(), "verify: environment %s at %s\n", f.env, where)
	clients := verify.Clients{Dynamic: kc.Dynamic, REST: kc.REST}
	if other != nil {
		return runSideBySide(cmd, ctx, t, kc, f, clients, opts, *other, verify.PolicyRun{Label: label, Source: label + " in the working tree", Policy: p})
	}
	rep, runErr := verify.Run(ctx, clients, opts)
	if rep == nil {
		return runErr
	}
	return writeVerifyResult(cmd, f, runErr, rep, len(rep.Findings), "the policy",
		func(dir string) error { return verify.WriteDir(dir, rep) },
		"report.md", "report.json", verify.FileTimeline, verify.FileRates, verify.FileHandoff)
}

// writeVerifyResult writes the report folder (with --report: writeDir, which
// writes files), then the result in the output format; the run's error
// comes first, then the disagreements with what (exit 1).
func writeVerifyResult(cmd *cobra.Command, f verifyFlags, runErr error, out output.Writer, disagreements int, what string, writeDir func(string) error, files ...string) error {
	if f.reportDir != "" {
		if err := writeDir(f.reportDir); err != nil {
			return errors.Join(runErr, fmt.Errorf("writing the report: %w", err))
		}
		paths := make([]string, len(files))
		for i, name := range files {
			paths[i] = filepath.Join(f.reportDir, name)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "verify: wrote %s\n", strings.Join(paths, ", "))
	}
	if err := out.Write(cmd.OutOrStdout(), f.format.Format()); err != nil {
		return errors.Join(runErr, err)
	}
	if runErr != nil {
		return runErr
	}
	if disagreements > 0 {
		return findingsError{fmt.Sprintf("verify: %d disagreement(s) with %s on environment %s", disagreements, what, f.env)}
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

// comparedPolicy loads --compare-with: a policy directory, else a revision
// of the environment's policy directory.
func comparedPolicy(t *envTarget, arg string) (*verify.PolicyRun, error) {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		p, err := policy.Load(arg)
		if err != nil {
			return nil, err
		}
		return &verify.PolicyRun{Label: arg, Source: "directory " + arg, Policy: p}, nil
	}
	c, err := t.Repo.Resolve(arg)
	if err != nil {
		return nil, usageError{fmt.Errorf("--compare-with %q: neither a policy directory nor a revision: %v", arg, err)}
	}
	p, err := environment.PolicyAt(t.Repo, c.Hash, t.Env.Policy)
	if err != nil {
		return nil, err
	}
	return &verify.PolicyRun{Label: arg, Source: fmt.Sprintf("%s at %s", t.Env.Policy, gitrepo.Short(c.Hash)), Policy: p}, nil
}

// runSideBySide runs the batches under other, then under mine, each
// policy's render for the environment reconciled in turn, and the render at
// the pin put back at the end.
func runSideBySide(cmd *cobra.Command, ctx context.Context, t *envTarget, kc *kube.Clients, f verifyFlags, c verify.Clients, o verify.Options, other, mine verify.PolicyRun) error {
	stderr := cmd.ErrOrStderr()
	// What the restore puts back is read before the cluster changes, so
	// that it cannot fail on git at the end.
	pinned, side, err := t.Pinned(ctx)
	if err != nil {
		return err
	}
	pinPolicy, err := environment.PolicyAt(t.Repo, side.Commit.Hash, t.Env.Policy)
	if err != nil {
		return fmt.Errorf("the policy at the pin: %w", err)
	}
	rec := &reconcile.Reconciler{Client: kc.Dynamic, Mapper: kc.Mapper}
	apply := func(ctx context.Context, what string, set drift.Set, p *policy.Policy) error {
		res, err := rec.Apply(ctx, unstructuredObjects(set), reconcile.Options{Owner: ownerLabels(t.Env.Name), Kinds: contract.RenderedKinds})
		if err != nil {
			return err
		}
		nodes, rep, err := rec.ReadyNodes(ctx, p, false, nil)
		if err != nil {
			return err
		}
		if fs := rep.Findings(); fs.HasErrors() {
			return fmt.Errorf("node readiness: %v", fs)
		}
		res.Nodes = nodes
		fmt.Fprintf(stderr, "verify: reconciled %s: %d created, %d configured, %d unchanged, %d pruned; %d GPU node(s) changed\n", what,
			res.Count(reconcile.Created), res.Count(reconcile.Configured), res.Count(reconcile.Unchanged), res.Count(reconcile.Pruned), res.NodesChanged())
		return nil
	}
	s, runErr := verify.RunSideBySide(ctx, c, verify.SideBySideOptions{
		Options:  o,
		Policies: []verify.PolicyRun{other, mine},
		Deploy: func(ctx context.Context, p *policy.Policy) error {
			files, err := t.Env.Render(p)
			if err != nil {
				return err
			}
			set, err := drift.Parse(files)
			if err != nil {
				return err
			}
			return apply(ctx, "its render", set, p)
		},
		Restore:   func(ctx context.Context) error { return apply(ctx, "the render at the pin", pinned, pinPolicy) },
		Restoring: fmt.Sprintf("the render at the pin %s (%s)", gitrepo.Short(side.Commit.Hash), side.Source()),
	})
	if s == nil {
		return runErr
	}
	return writeVerifyResult(cmd, f, runErr, s, len(s.Findings), "the policies",
		func(dir string) error { return verify.WriteSideBySideDir(dir, s) },
		"report.md", "report.json", verify.FileHandoff)
}
