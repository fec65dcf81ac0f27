package verify

import (
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

func labPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.Load("../policies/lab")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLabPrediction: the lab's cache-free step at batch priority — four at
// once with the 7B down, none with it up (404 MiB of GPU memory left).
func TestLabPrediction(t *testing.T) {
	p := labPolicy(t)
	predict, err := AdmissionPredictor(p)
	if err != nil {
		t.Fatal(err)
	}
	d, err := predict("gpu-step-no-cache", "batch", down)
	if err != nil {
		t.Fatal(err)
	}
	// No Argo lock: Kueue alone gates, and the cache-free variant is
	// predicted from gpu-step's row (the same quota, the same locks).
	if d.Admitted != 4 || d.Lock != "" || d.LockSize != 0 {
		t.Errorf("7B down: %+v", d)
	}
	u, err := predict("gpu-step-no-cache", "batch", up)
	if err != nil {
		t.Fatal(err)
	}
	if u.Admitted != 0 || u.Margin["gpupolicy.dev/gpu-memory"] != "404Mi" || !strings.Contains(u.Why(), "gpupolicy.dev/gpu-memory (404Mi left)") {
		t.Errorf("7B up: %+v (%s)", u, u.Why())
	}
	if len(u.Explain) == 0 {
		t.Errorf("7B up: no starvation finding from explain")
	}
	t.Logf("down: %d (%s); up: %d (%s); explain: %v", d.Admitted, d.Why(), u.Admitted, u.Why(), u.Explain)
	if _, err := predict("no-such-template", "batch", down); err == nil {
		t.Error("a template without a row predicted")
	}
}

func TestPickTemplate(t *testing.T) {
	p := labPolicy(t)
	if n, ns, err := pickTemplate(p, ""); err != nil || n != "gpu-step-no-cache" || ns != "experiments" {
		t.Errorf("default: %s %s %v", n, ns, err)
	}
	if n, _, err := pickTemplate(p, "gpu-step"); err != nil || n != "gpu-step" {
		t.Errorf("gpu-step: %s %v", n, err)
	}
	if _, _, err := pickTemplate(p, "nope"); err == nil || !strings.Contains(err.Error(), "gpu-step-no-cache") {
		t.Errorf("nope: %v", err)
	}
	// The lab takes no Argo lock.
	if l := lockOf(p, "gpu-step"); l != nil {
		t.Errorf("lock of gpu-step: %+v", l)
	}
	if l := lockOf(p, "gpu-step-no-cache"); l != nil {
		t.Errorf("lock of gpu-step-no-cache: %+v", l)
	}
}

func TestPriorityRefused(t *testing.T) {
	p := labPolicy(t)
	_, err := newRunner(Clients{}, Options{Policy: p, Priority: "training", Predict: func(string, string, State) (Prediction, error) { return Prediction{}, nil }})
	if err == nil || !strings.Contains(err.Error(), "lowest priority (batch) only") {
		t.Fatalf("training priority: %v", err)
	}
	r, err := newRunner(Clients{}, Options{Policy: p, Predict: func(string, string, State) (Prediction, error) { return Prediction{}, nil }})
	if err != nil || r.o.Priority != "batch" || len(r.o.Levels) != 5 || r.o.StarveWatch != minStarveWatch {
		t.Fatalf("defaults: %+v %v", r, err)
	}
}
