package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/kube/reconcile"
	"github.com/gpupolicy/gpupolicy/internal/output"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

func init() { commands = append(commands, newReconcileCmd) }

func newReconcileCmd() *cobra.Command {
	var (
		env    string
		o      *output.Flag
		dryRun bool
		noNode bool
		only   bool
		cf     clusterFlags
	)
	cmd := &cobra.Command{
		Use:   "reconcile --env ENV [--kubeconfig F] [--context C] [--dry-run] [--nodes-only|--skip-nodes]",
		Short: "Apply the render at an environment's pin to its cluster",
		Long: `reconcile brings environment ENV's cluster to the render at its pin (the
commit in environments/ENV/environment.yaml), read straight from git objects:

  - server-side apply of every object, with field manager "gpupolicy",
    taking over fields someone set by hand;
  - in order: Namespaces, then cluster-scoped objects (ResourceFlavors,
    WorkloadPriorityClasses and Cohorts before the ClusterQueues that name
    them, each ValidatingAdmissionPolicy before its binding), then
    namespaced ones (LimitRanges and ConfigMaps before LocalQueues and
    WorkflowTemplates). Kueue's and Argo's CRDs must be installed; a missing
    one stops the run before anything is applied;
  - pruning of the objects gpupolicy owns (labels
    app.kubernetes.io/managed-by=gpupolicy and gpupolicy.dev/environment=ENV)
    that the pin no longer renders, of every kind render writes, even a
    kind the pin has none of any more (its last Cohort dropped). Namespaces
    are never pruned;
  - node readiness, from the policy at the pin: every node a card's
    nodes.selector picks is made to advertise the declaration resource
    (gpupolicy.dev/gpu-memory = the card's memory in MiB × cardsPerNode) in
    its status, and to carry nvidia.com/device-plugin.config=CARD, by which
    the device plugin picks the card's time-slicing config. Field manager
    "gpupolicy-node-readiness" owns both and nothing else of a Node; a node
    that left every selection has both taken off. A card whose selector
    matches no node is a finding (exit 1), not an error. --skip-nodes leaves
    nodes alone (a cluster whose scheduler ignores the declaration resource:
    see the README); --nodes-only does only this (a cluster whose GitOps
    engine, Flux or Argo CD, applies the render).

A second run changes nothing and says so. When a run fails midway it lists
what was applied, what failed and what was not reached; run it again to
complete it. --dry-run sends everything with the API server's dry run: every
admission check runs, nothing is stored, nothing is pruned.

Exit 0 when the cluster matches the pin, 1 when a card has no node or a
node is selected for two cards, 2 on an error.`,
		Example: `  gpupolicy reconcile --env local --dry-run
  gpupolicy reconcile --env local
  gpupolicy reconcile --env lab --context lab-admin

  # In a deploy job (no GitOps engine): preview in the log, then apply
  gpupolicy reconcile --env lab --dry-run && gpupolicy reconcile --env lab -o json > reconcile.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if only && noNode {
				return usageError{errors.New("--nodes-only and --skip-nodes exclude each other")}
			}
			if env == "" {
				return usageError{errors.New("--env ENV is required")}
			}
			t, err := openEnv(env, true)
			if err != nil {
				return err
			}
			set, side, err := t.Pinned(cmd.Context())
			if err != nil {
				return err
			}
			c, where, err := cf.clients(t)
			if err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			verb := "reconciling"
			if dryRun {
				verb = "dry run: reconciling"
			}
			fmt.Fprintf(stderr, "%s %s (%d objects from %s) on %s\n", verb, env, len(set), side.Source(), where)
			r := &reconcile.Reconciler{Client: c.Dynamic, Mapper: c.Mapper}
			res, applyErr := &reconcile.Result{DryRun: dryRun, Changes: []reconcile.Change{}}, error(nil)
			if !only { // with --nodes-only, the GitOps engine applies the render
				res, applyErr = r.Apply(cmd.Context(), unstructuredObjects(set), reconcile.Options{
					Owner:  ownerLabels(env),
					DryRun: dryRun,
					Kinds:  contract.RenderedKinds,
					Progress: func(ch reconcile.Change) {
						if ch.Action != reconcile.Unchanged && ch.Action != reconcile.NotApplied {
							fmt.Fprintf(stderr, "  %s\n", ch)
						}
					},
				})
			}
			if applyErr == nil && !noNode {
				applyErr = readyNodes(cmd, t, side.Commit.Hash, r, res, dryRun)
			}
			rep := &reconcileReport{env: env, res: res, applyErr: applyErr}
			if err := rep.Write(cmd.OutOrStdout(), o.Format()); err != nil {
				return err
			}
			if applyErr == nil && res.NodeFindings.HasErrors() {
				return findingsError{}
			}
			return applyErr
		},
	}
	cmd.Flags().StringVar(&env, "env", "", "the environment (environments/ENV)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "use the API server's dry run; change nothing")
	cmd.Flags().BoolVar(&only, "nodes-only", false, "only make the GPU nodes ready (a cluster whose GitOps engine applies the render)")
	cmd.Flags().BoolVar(&noNode, "skip-nodes", false, "leave GPU nodes alone (no declaration advertised, no device-plugin config label)")
	o = outputFlag(cmd, output.Text, reconcileFormats...)
	cf.add(cmd)
	return cmd
}

// readyNodes runs node readiness from the policy at the pin and records it
// in res.
func readyNodes(cmd *cobra.Command, t *envTarget, pin string, r *reconcile.Reconciler, res *reconcile.Result, dryRun bool) error {
	p, err := environment.PolicyAt(t.Repo, pin, t.Env.Policy)
	if err != nil {
		return fmt.Errorf("the policy at the pin: %w", err)
	}
	stderr := cmd.ErrOrStderr()
	nodes, rep, err := r.ReadyNodes(cmd.Context(), p, dryRun, func(ch reconcile.Change) {
		if ch.Action != reconcile.Unchanged {
			fmt.Fprintf(stderr, "  %s\n", ch)
		}
	})
	res.Nodes = nodes
	if rep != nil {
		res.NodeFindings = rep.Findings()
	}
	return err
}

func writeReconcileSummary(w io.Writer, env string, res *reconcile.Result, applyErr error) {
	prefix := ""
	if res.DryRun {
		prefix = "dry run: "
	}
	counts := fmt.Sprintf("%d created, %d configured, %d unchanged, %d pruned",
		res.Count(reconcile.Created), res.Count(reconcile.Configured), res.Count(reconcile.Unchanged), res.Count(reconcile.Pruned))
	switch {
	case applyErr != nil:
		fmt.Fprintf(w, "%sreconcile of %s stopped: %s; %d failed, %d not applied\n", prefix, env, counts,
			res.Count(reconcile.Failed), res.Count(reconcile.NotApplied))
		for _, ch := range res.Changes {
			if ch.Action == reconcile.Failed || ch.Action == reconcile.NotApplied {
				fmt.Fprintf(w, "  %s\n", ch)
			}
		}
		fmt.Fprintf(w, "run it again to complete it\n")
	case !res.Changed():
		fmt.Fprintf(w, "%s%s: nothing to change, the cluster matches the pin (%d objects, %d GPU nodes ready)\n", prefix, env, len(res.Changes), len(res.Nodes))
	default:
		made := "made ready"
		if res.DryRun {
			made = "would be made ready"
		}
		fmt.Fprintf(w, "%s%s: %s; %d of %d GPU nodes %s\n", prefix, env, counts, res.NodesChanged(), len(res.Nodes), made)
	}
	for _, f := range res.NodeFindings {
		fmt.Fprintf(w, "%s %s: %s\n", f.Severity, f.Rule, f.Message)
	}
}

// reconcileFormats are the formats reconcile prints its result in.
var reconcileFormats = []output.Format{output.Text, output.JSON, output.YAML}

// reconcileReport is what reconcile did (output.Writer): the result as JSON
// or YAML, or a summary for a terminal.
type reconcileReport struct {
	env      string
	res      *reconcile.Result
	applyErr error
}

func (r *reconcileReport) Write(w io.Writer, f output.Format) error {
	switch f {
	case output.JSON:
		return output.WriteJSON(w, r.res)
	case output.YAML:
		return output.WriteYAML(w, r.res)
	}
	writeReconcileSummary(w, r.env, r.res, r.applyErr)
	return nil
}
