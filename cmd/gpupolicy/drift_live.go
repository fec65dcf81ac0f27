package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/drift/live"
	"github.com/gpupolicy/gpupolicy/internal/environment"
)

// liveSides name the two ends of the live comparison in reports.
var liveSides = drift.Sides{From: "the pin", To: "the cluster"}

// liveReport is drift --live's JSON: the git side, the live side and the
// Workloads check.
type liveReport struct {
	Git  *drift.Report `json:"git"`
	Live struct {
		Cluster     string               `json:"cluster"`
		Differences []drift.Difference   `json:"differences"`
		Workloads   []live.WorkloadCount `json:"workloads"`
	} `json:"live"`
}

func (r *liveReport) drifted() bool {
	if r.Git.Drifted() || len(r.Live.Differences) > 0 {
		return true
	}
	for _, w := range r.Live.Workloads {
		if w.AtDefault {
			return true
		}
	}
	return false
}

func runLiveDrift(cmd *cobra.Command, t *envTarget, git *drift.Report, cf clusterFlags, format string) error {
	ctx := cmd.Context()
	pinned, _, err := pinnedSet(ctx, t)
	if err != nil {
		return err
	}
	c, where, err := cf.clients(t)
	if err != nil {
		return err
	}
	side := &live.Side{Client: c.Dynamic, Mapper: c.Mapper, Pinned: pinned, Owner: ownerLabels(t.env.Name), Name: liveSides.To, Where: where}
	liveSet, err := side.Objects(ctx)
	if err != nil {
		return fmt.Errorf("reading the cluster (%s): %w", where, err)
	}
	r := &liveReport{Git: git}
	r.Live.Cluster = where
	r.Live.Differences = drift.Compare(pinned, liveSet)
	drift.Explain(r.Live.Differences, pinned, liveSet, liveSides)
	p, err := environment.PolicyAt(t.repo, git.Pin.Commit.Hash, t.env.Policy)
	if err != nil {
		return fmt.Errorf("the policy at the pin: %w", err)
	}
	r.Live.Workloads, err = live.Workloads(ctx, c.Dynamic, p.DeclarationResource, p.DefaultGPUMemoryMiB)
	if err != nil {
		return fmt.Errorf("reading Workloads (%s): %w", where, err)
	}
	if r.Live.Differences == nil {
		r.Live.Differences = []drift.Difference{}
	}
	if r.Live.Workloads == nil {
		r.Live.Workloads = []live.WorkloadCount{}
	}
	out := cmd.OutOrStdout()
	switch format {
	case "json":
		err = writeJSON(out, r)
	case "markdown", "md":
		err = r.markdown(out)
	default:
		err = r.text(out)
	}
	if err != nil {
		return err
	}
	if r.drifted() {
		return findingsError{}
	}
	return nil
}

func (r *liveReport) atDefault() []live.WorkloadCount {
	var out []live.WorkloadCount
	for _, w := range r.Live.Workloads {
		if w.AtDefault {
			out = append(out, w)
		}
	}
	return out
}

func (r *liveReport) text(w io.Writer) error {
	if err := r.Git.Text(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nlive: %s against the pin\n", r.Live.Cluster)
	if len(r.Live.Differences) == 0 {
		fmt.Fprintf(w, "no live drift: the cluster holds the render at the pin\n")
	} else {
		fmt.Fprintln(w)
		drift.WriteText(w, r.Live.Differences, liveSides, false)
		fmt.Fprintf(w, "\nlive drift: %d difference(s); bring the cluster back with: gpupolicy reconcile --env %s\n",
			len(r.Live.Differences), r.Git.Environment)
	}
	def := r.atDefault()
	fmt.Fprintf(w, "\nWorkloads: %d, %d counted at the GPU-memory default\n", len(r.Live.Workloads), len(def))
	for _, wc := range def {
		fmt.Fprintf(w, "  %s/%s: %s\n", wc.Namespace, wc.Workload, wc.Message)
	}
	return nil
}

func (r *liveReport) markdown(w io.Writer) error {
	if err := r.Git.Markdown(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n### Live: %s\n\n", r.Live.Cluster)
	if len(r.Live.Differences) == 0 {
		fmt.Fprintf(w, "**No live drift**: the cluster holds the render at the pin.\n")
	} else {
		drift.WriteMarkdown(w, r.Live.Differences, liveSides, false)
		fmt.Fprintf(w, "\nBring the cluster back with `gpupolicy reconcile --env %s`.\n", r.Git.Environment)
	}
	def := r.atDefault()
	fmt.Fprintf(w, "\n### Workloads\n\n%d Workloads, %d counted at the GPU-memory default.\n", len(r.Live.Workloads), len(def))
	for _, wc := range def {
		fmt.Fprintf(w, "- `%s/%s`: %s\n", wc.Namespace, wc.Workload, wc.Message)
	}
	return nil
}
