package drift

import (
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/finding"
)

func TestFindings(t *testing.T) {
	ds := []Difference{
		{Change: Changed, Kind: "WorkflowTemplate", Namespace: "experiments", Name: "gpu-step", Path: "spec.x", To: "1Gi",
			Consequence: "Kueue counts every job at the default"},
		{Change: Added, Kind: "LocalQueue", Namespace: "experiments", Name: "gpu-general"},
		{Change: Removed, Kind: "ClusterQueue", Name: "old"},
	}
	fs := Findings(RulePinDrift, ds, GitSides)
	want := []finding.Finding{
		{Rule: "pin-drift", Severity: finding.Warning, Object: "WorkflowTemplate/experiments/gpu-step",
			Message: "WorkflowTemplate/experiments/gpu-step spec.x: (absent) at the pin, 1Gi at HEAD. Kueue counts every job at the default"},
		{Rule: "pin-drift", Severity: finding.Warning, Object: "LocalQueue/experiments/gpu-general",
			Message: "LocalQueue/experiments/gpu-general is missing at the pin (only HEAD has it)"},
		{Rule: "pin-drift", Severity: finding.Warning, Object: "ClusterQueue/old",
			Message: "ClusterQueue/old is only at the pin (HEAD does not have it)"},
	}
	if len(fs) != len(want) {
		t.Fatalf("%d findings, want %d: %v", len(fs), len(want), fs)
	}
	for i := range want {
		if fs[i] != want[i] {
			t.Errorf("finding %d:\n got %+v\nwant %+v", i, fs[i], want[i])
		}
	}
	if got := Findings(RulePinDrift, nil, GitSides); got == nil || len(got) != 0 {
		t.Errorf("no differences: %#v, want an empty list", got)
	}
}
