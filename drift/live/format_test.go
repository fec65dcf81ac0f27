package live

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/output"
)

// drift --live -o json carries every finding of the report, in the one
// finding shape, beside git and live.
func TestReportJSONHasFindings(t *testing.T) {
	r := &Report{Git: &drift.Report{Environment: "lab"}}
	r.Live.Cluster = "kind-lab"
	r.Live.Differences = []drift.Difference{{Change: drift.Changed, Kind: "ConfigMap", Namespace: "argo", Name: "locks", Path: "data.main", From: "4", To: "1"}}
	r.Live.Workloads = []WorkloadCount{{Namespace: "experiments", Workload: "eval", AtDefault: true, Message: "counted at the default"}}
	for _, f := range []output.Format{output.JSON, output.YAML} {
		var b bytes.Buffer
		if err := r.Write(&b, f); err != nil {
			t.Fatal(err)
		}
		if f == output.YAML {
			continue
		}
		var doc struct {
			Git      map[string]any `json:"git"`
			Live     struct{ Cluster string }
			Findings []struct{ Rule, Object string }
		}
		if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
			t.Fatalf("%v\n%s", err, b.String())
		}
		if doc.Git["environment"] != "lab" || doc.Live.Cluster != "kind-lab" || len(doc.Findings) != 2 ||
			doc.Findings[0].Rule != "live-drift" || doc.Findings[1].Rule != "counted-at-default" ||
			doc.Findings[1].Object != "Workload/experiments/eval" {
			t.Errorf("document:\n%s", b.String())
		}
	}
}
