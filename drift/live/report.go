package live

import (
	"context"
	"fmt"
	"io"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/internal/kube/reconcile"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// Sides name the two ends of the live comparison in reports.
var Sides = drift.Sides{From: "the pin", To: "the cluster"}

// Report is drift --live's report (and its JSON): the git side, the live
// side and the Workloads check.
type Report struct {
	Git  *drift.Report `json:"git"`
	Live struct {
		Cluster     string             `json:"cluster"`
		Differences []drift.Difference `json:"differences"`
		Workloads   []WorkloadCount    `json:"workloads"`
		// Nodes is the GPU nodes' readiness (reconcile's node readiness,
		// read only); Unschedulable, the GPU pods the scheduler cannot
		// place.
		Nodes         *reconcile.NodeReport `json:"nodes"`
		Unschedulable []PendingPod          `json:"unschedulable"`
		// Engine is what the GitOps engine runs; absent when the
		// environment names none.
		Engine *Engine `json:"engine,omitempty"`
		// Bypasses are what got around the policy (bypass.go).
		Bypasses []Bypass `json:"bypasses"`
	} `json:"live"`
}

// Check compares the cluster (side, whose Pinned is the render at the pin)
// with the pinned render, explains each difference, and checks every Kueue
// Workload against p, the policy at the pin: its GPU-memory declaration and
// default. git is the pin-against-HEAD report it extends.
func Check(ctx context.Context, side *Side, git *drift.Report, p *policy.Policy) (*Report, error) {
	liveSet, err := side.Objects(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster (%s): %w", side.Where, err)
	}
	r := &Report{Git: git}
	r.Live.Cluster = side.Where
	r.Live.Differences = drift.Compare(side.Pinned, liveSet)
	drift.Explain(r.Live.Differences, side.Pinned, liveSet, Sides)
	r.Live.Workloads, err = Workloads(ctx, side.Client, p.DeclarationResource, p.DefaultGPUMemoryMiB)
	if err != nil {
		return nil, fmt.Errorf("reading Workloads (%s): %w", side.Where, err)
	}
	if r.Live.Nodes, err = reconcile.ReadNodes(ctx, side.Client, p); err != nil {
		return nil, fmt.Errorf("reading GPU nodes (%s): %w", side.Where, err)
	}
	if r.Live.Unschedulable, err = Unschedulable(ctx, side.Client, p.DeclarationResource); err != nil {
		return nil, fmt.Errorf("reading pending pods (%s): %w", side.Where, err)
	}
	if r.Live.Bypasses, err = Bypasses(ctx, side.Client, p); err != nil {
		return nil, fmt.Errorf("reading GPU pods and Workloads (%s): %w", side.Where, err)
	}
	if side.Engine != nil {
		if r.Live.Engine, err = ReadEngine(ctx, side.Client, *side.Engine); err != nil {
			return nil, fmt.Errorf("reading the GitOps engine (%s): %w", side.Where, err)
		}
	}
	if r.Live.Differences == nil {
		r.Live.Differences = []drift.Difference{}
	}
	if r.Live.Workloads == nil {
		r.Live.Workloads = []WorkloadCount{}
	}
	return r, nil
}

// Drifted reports drift anywhere: between the pin and HEAD, between the pin
// and the cluster, or a Workload counted at the GPU-memory default.
func (r *Report) Drifted() bool {
	if r.Git.Drifted() || len(r.Live.Differences) > 0 || len(r.Live.Unschedulable) > 0 || len(r.Live.Bypasses) > 0 {
		return true
	}
	if r.Live.Nodes != nil && len(r.Live.Nodes.Findings()) > 0 {
		return true
	}
	if len(r.Live.Engine.Findings()) > 0 {
		return true
	}
	for _, w := range r.Live.Workloads {
		if w.AtDefault {
			return true
		}
	}
	return false
}

func (r *Report) atDefault() []WorkloadCount {
	var out []WorkloadCount
	for _, w := range r.Live.Workloads {
		if w.AtDefault {
			out = append(out, w)
		}
	}
	return out
}

// Text prints the report for a terminal.
func (r *Report) Text(w io.Writer) error {
	if err := r.Git.Text(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nlive: %s against the pin\n", r.Live.Cluster)
	if len(r.Live.Differences) == 0 {
		fmt.Fprintf(w, "no live drift: the cluster holds the render at the pin\n")
	} else {
		fmt.Fprintln(w)
		drift.WriteText(w, r.Live.Differences, Sides, false)
		fmt.Fprintf(w, "\nlive drift: %d difference(s); bring the cluster back with: gpupolicy reconcile --env %s\n",
			len(r.Live.Differences), r.Git.Environment)
	}
	def := r.atDefault()
	fmt.Fprintf(w, "\nWorkloads: %d, %d counted at the GPU-memory default\n", len(r.Live.Workloads), len(def))
	for _, wc := range def {
		fmt.Fprintf(w, "  %s/%s: %s\n", wc.Namespace, wc.Workload, wc.Message)
	}
	r.nodesText(w, "  ")
	r.bypassText(w, false)
	r.engineText(w, false)
	return nil
}

// engineText prints what the GitOps engine runs, and what the commit it
// runs lacks of the pin.
func (r *Report) engineText(w io.Writer, md bool) {
	e := r.Live.Engine
	if e == nil {
		return
	}
	if md {
		fmt.Fprintf(w, "\n### GitOps engine\n\n")
	} else {
		fmt.Fprintf(w, "\nGitOps engine: %s (%s)\n", e.Engine, e.Object)
	}
	fs := e.Findings()
	if len(fs) == 0 {
		line := fmt.Sprintf("%s runs the pin %s", e.Object, gitrepo.Short(e.Pin))
		if md {
			fmt.Fprintf(w, "**%s**.\n", line)
		} else {
			fmt.Fprintf(w, "  %s\n", line)
		}
		return
	}
	for _, f := range fs {
		if md {
			fmt.Fprintf(w, "- %s\n", f.Message)
		} else {
			fmt.Fprintf(w, "  %s\n", f.Message)
		}
	}
	if e.Lacks != nil && e.Lacks.Drifted() {
		fmt.Fprintln(w)
		if md {
			drift.WriteMarkdown(w, e.Lacks.Differences, EngineSides, false)
		} else {
			drift.WriteText(w, e.Lacks.Differences, EngineSides, false)
		}
	}
}

// nodesText prints the GPU nodes' readiness and the pods they hold up.
func (r *Report) nodesText(w io.Writer, indent string) {
	if r.Live.Nodes == nil {
		return
	}
	ready := 0
	for _, n := range r.Live.Nodes.Nodes {
		if n.Ready {
			ready++
		}
	}
	fmt.Fprintf(w, "\nGPU nodes: %d selected by the policy, %d ready\n", len(r.Live.Nodes.Nodes), ready)
	for _, f := range r.Live.Nodes.Findings() {
		fmt.Fprintf(w, "%s%s\n", indent, f.Message)
	}
	for _, pp := range r.Live.Unschedulable {
		fmt.Fprintf(w, "%s%s\n", indent, pp.Message)
	}
}

// Markdown prints the report for a scheduled report or a pull request.
func (r *Report) Markdown(w io.Writer) error {
	if err := r.Git.Markdown(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n### Live: %s\n\n", r.Live.Cluster)
	if len(r.Live.Differences) == 0 {
		fmt.Fprintf(w, "**No live drift**: the cluster holds the render at the pin.\n")
	} else {
		drift.WriteMarkdown(w, r.Live.Differences, Sides, false)
		fmt.Fprintf(w, "\nBring the cluster back with `gpupolicy reconcile --env %s`.\n", r.Git.Environment)
	}
	def := r.atDefault()
	fmt.Fprintf(w, "\n### Workloads\n\n%d Workloads, %d counted at the GPU-memory default.\n", len(r.Live.Workloads), len(def))
	for _, wc := range def {
		fmt.Fprintf(w, "- `%s/%s`: %s\n", wc.Namespace, wc.Workload, wc.Message)
	}
	if r.Live.Nodes != nil {
		fmt.Fprintf(w, "\n### GPU nodes\n\n")
		r.nodesText(w, "- ")
	}
	r.bypassText(w, true)
	r.engineText(w, true)
	return nil
}
