package live

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
)

func liveTestReport() *Report {
	pin := drift.Endpoint{Commit: gitrepo.Commit{Hash: strings.Repeat("a", 40), Subject: "render"}, Source: "deploy/lab at aaaaaaa"}
	r := &Report{Git: &drift.Report{Environment: "lab", Pin: pin, Head: pin}}
	r.Live.Cluster = "context lab-admin (https://lab:6443)"
	r.Live.Differences = []drift.Difference{}
	r.Live.Workloads = []WorkloadCount{{Namespace: "experiments", Workload: "job-a", CountedMiB: 1024}}
	return r
}

// Drift anywhere makes the report drifted: the pin against HEAD, the
// cluster against the pin, or a Workload counted at the default.
func TestReportDrifted(t *testing.T) {
	r := liveTestReport()
	if r.Drifted() {
		t.Error("a clean report is drifted")
	}
	r.Live.Workloads = append(r.Live.Workloads, WorkloadCount{Namespace: "experiments", Workload: "eval", AtDefault: true, Message: "declared 12,452 MiB, counted 1,024 MiB"})
	if !r.Drifted() {
		t.Error("a Workload at the default is not drift")
	}
	r = liveTestReport()
	r.Live.Differences = []drift.Difference{{Change: drift.Removed, Kind: "ConfigMap", Namespace: "experiments", Name: "gpu-semaphore"}}
	if !r.Drifted() {
		t.Error("a live difference is not drift")
	}
	r = liveTestReport()
	r.Git.Differences = r.Live.Differences
	r.Git.Differences = append(r.Git.Differences, drift.Difference{Change: drift.Changed, Kind: "ConfigMap", Path: "data.main"})
	if !r.Drifted() {
		t.Error("git drift is not drift")
	}
}

func TestReportText(t *testing.T) {
	r := liveTestReport()
	r.Live.Workloads = append(r.Live.Workloads, WorkloadCount{Namespace: "experiments", Workload: "eval", AtDefault: true, Message: "counted at the default"})
	var text, md bytes.Buffer
	if err := r.Text(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nlive: context lab-admin (https://lab:6443) against the pin\n",
		"no live drift: the cluster holds the render at the pin\n",
		"\nWorkloads: 2, 1 counted at the GPU-memory default\n  experiments/eval: counted at the default\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	r.Live.Differences = []drift.Difference{{Change: drift.Removed, Kind: "Namespace", Name: "llm"}}
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\n### Live: context lab-admin (https://lab:6443)\n",
		"Bring the cluster back with `gpupolicy reconcile --env lab`.",
		"2 Workloads, 1 counted at the GPU-memory default.\n- `experiments/eval`: counted at the default\n",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}
