package live

import (
	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/kube/reconcile"
)

// The rules drift --live applies to the cluster.
var (
	RuleLiveDrift = finding.Register(finding.Rule{ID: "live-drift", Verb: finding.Drift, Severity: finding.Error,
		Reason: "the cluster differs from the render at its pin: a change by hand or a failed sync, which the next sync undoes or keeps failing on"})
	RuleCountedAtDefault = finding.Register(finding.Rule{ID: "counted-at-default", Verb: finding.Drift, Severity: finding.Error,
		Reason: "Kueue counts a job whose pods carry no declaration at the LimitRange default (the eval job that declared 12,452 MiB was counted as 1,024 MiB)"})
)

// Findings are the report's findings: the git side's (pin-drift), then one
// live-drift per difference between the pin and the cluster, then one
// counted-at-default per Workload Kueue counted at the GPU-memory default,
// then the GPU nodes' and the GitOps engine's (engine.go).
func (r *Report) Findings() finding.List {
	out := finding.List{}
	if r.Git != nil {
		out = append(out, r.Git.Findings...)
	}
	out = append(out, drift.Findings(RuleLiveDrift, r.Live.Differences, Sides)...)
	for _, w := range r.Live.Workloads {
		if !w.AtDefault {
			continue
		}
		f := RuleCountedAtDefault.New(w.Message)
		f.Object = drift.Ref("Workload", w.Namespace, w.Workload)
		out = append(out, f)
	}
	if r.Live.Nodes != nil {
		out = append(out, r.Live.Nodes.Findings()...)
	}
	out = append(out, r.Live.Engine.Findings()...)
	for _, b := range r.Live.Bypasses {
		out = append(out, b.Finding())
	}
	for _, pp := range r.Live.Unschedulable {
		f := reconcile.RulePodUnschedulable.New(pp.Message)
		f.Object = drift.Ref("Pod", pp.Namespace, pp.Name)
		out = append(out, f)
	}
	return out
}
