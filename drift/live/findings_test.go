package live

import (
	"testing"

	"github.com/gpupolicy/gpupolicy/drift"
)

func TestReportFindings(t *testing.T) {
	r := &Report{Git: &drift.Report{Differences: []drift.Difference{{Change: drift.Added, Kind: "LimitRange", Namespace: "experiments", Name: "gpu"}}}}
	r.Git.Findings = drift.Findings(drift.RulePinDrift, r.Git.Differences, drift.GitSides)
	r.Live.Differences = []drift.Difference{{Change: drift.Changed, Kind: "ConfigMap", Namespace: "argo", Name: "locks", Path: "data.main", From: "4", To: "1"}}
	r.Live.Workloads = []WorkloadCount{
		{Namespace: "experiments", Workload: "eval", AtDefault: true, Message: "declared 12,452 MiB, counted 1,024 MiB"},
		{Namespace: "experiments", Workload: "ok"},
	}
	fs := r.Findings()
	var got []string
	for _, f := range fs {
		got = append(got, f.Rule+" "+f.Object+": "+f.Message)
	}
	want := []string{
		"pin-drift LimitRange/experiments/gpu: LimitRange/experiments/gpu is missing at the pin (only HEAD has it)",
		"live-drift ConfigMap/argo/locks: ConfigMap/argo/locks data.main: 4 at the pin, 1 at the cluster",
		"counted-at-default Workload/experiments/eval: declared 12,452 MiB, counted 1,024 MiB",
	}
	if len(got) != len(want) {
		t.Fatalf("findings %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("finding %d: %q, want %q", i, got[i], want[i])
		}
	}
}
