package verify_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
	"github.com/gpupolicy/gpupolicy/verify"
)

// TestVerifyExclusive: verify --exclusive on the lab, the always-on models
// up and the 7B down. Four batch jobs run (all the queue admits), then the
// vLLM benchmark's exclusive job is submitted into them at training
// priority, asking the 4 shares, 8 GiB and 12,604 MiB the models leave.
// Kueue evicts the four (withinClusterQueue LowerPriority), as explain
// says, and admits it; by the cluster's own Workload and pod stamps
// nothing but the always-on models holds quota or runs a GPU pod on the
// card while it does. Argo runs the evicted steps again afterwards. Short
// holds: about 80 s of the package's time.
func TestVerifyExclusive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := labCluster(t)
	lab := labPolicy(t)
	if err := clustertest.LabUp(ctx, c, lab); err != nil {
		t.Fatal(err)
	}
	o := options(t, lab, "excl")
	// The batch jobs hold long enough to still run when the exclusive job
	// is admitted (submitted once all four run).
	o.Levels, o.Hold, o.Exclusive = []int{1}, 12*time.Second, true
	r, err := verify.Run(ctx, clients(t, c), o)
	if err != nil {
		t.Fatal(err)
	}
	writeReport(t, r)
	nothingLeft(t, ctx, c, o.RunID)
	if !r.OK() {
		t.Errorf("findings: %v", r.Findings)
	}
	x := r.Exclusive
	if x == nil {
		t.Fatal("no exclusive batch in the report")
	}
	if x.Template != "vllm-bench" || x.Priority != "training" || x.Jobs != "evict" || x.Outcome != verify.Succeeded {
		t.Errorf("exclusive job %s: %s at %s (jobs %s), %s", x.Job, x.Template, x.Priority, x.Jobs, x.Outcome)
	}
	if len(x.RunningAtSubmit) != 4 || len(x.Evicted) != 4 {
		t.Errorf("submitted while %v ran, evicted %v; want 4 running, 4 evicted", x.RunningAtSubmit, x.Evicted)
	}
	if x.Predicted != admission.ExclusiveEvicts {
		t.Errorf("the model's word: %q, want %q", x.Predicted, admission.ExclusiveEvicts)
	}
	if len(x.Beside) != 0 {
		t.Errorf("ran beside the exclusive job: %+v", x.Beside)
	}
	// The four models' Workloads and pods held their quota beside it.
	if len(x.AlwaysOn) != 8 {
		t.Errorf("always-on beside it: %v, want the 4 models' Workloads and pods", x.AlwaysOn)
	}
	if x.WorkloadsSeen < 9 || x.PodsSeen < 9 {
		t.Errorf("recorded %d Workloads and %d pods; want at least the 4 models and the 5 jobs", x.WorkloadsSeen, x.PodsSeen)
	}
	// The batch's own stamps agree: every evicted job was admitted before
	// the exclusive one, and Argo ran its step again (a new pod, a new
	// Workload) once the exclusive job's quota was released; each then
	// succeeded.
	if len(x.Rerun) != 4 {
		t.Errorf("ran again after it: %v, want the 4 evicted", x.Rerun)
	}
	var b *verify.Batch
	for i := range r.Batches {
		if r.Batches[i].Kind == verify.ExclusiveBatch {
			b = &r.Batches[i]
		}
	}
	if b == nil || len(b.Jobs) != 5 {
		t.Fatalf("exclusive batch: %+v", b)
	}
	for _, j := range b.Jobs {
		if j.Name == x.Job {
			continue
		}
		if !slices.Contains(x.Evicted, j.Name) {
			t.Errorf("job %s was not evicted", j.Name)
		}
		if j.Admitted.IsZero() || !j.Admitted.Before(x.Admitted) || j.Outcome != verify.Succeeded {
			t.Errorf("job %s admitted %v (the exclusive job %v), %s; want admitted before it, then succeeded", j.Name, j.Admitted, x.Admitted, j.Outcome)
		}
	}
	if x.Started.IsZero() || x.Ended.Sub(x.Started) < 10*time.Second {
		t.Errorf("exclusive job ran %v to %v, want its 12 s hold", x.Started, x.Ended)
	}
}
