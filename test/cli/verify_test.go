package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpupolicy/gpupolicy/test/clustertest"
)

// TestVerifyLocalCluster runs gpupolicy verify against the local lab
// cluster: the lab deployed as the policy says (exit 0, the report files
// written, the cancel timed), then with the main lock at 1 on the cluster
// while the policy says 4 (exit 1, naming the disagreement).
func TestVerifyLocalCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, p := labUp(t, ctx)

	dir := filepath.Join(t.TempDir(), "report")
	code, stdout, stderr := gpupolicy(t, "verify", "--env", "local", "--kubeconfig", c.Kubeconfig(), "--levels", "1,2", "--batches", "1",
		"--hold", "6s", "--cancel", "--report", dir, "-o", "json")
	t.Logf("stderr:\n%s", stderr)
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s", code, stdout)
	}
	var rep struct {
		Levels []struct {
			Level, MaxRunning int
		} `json:"levels"`
		Cancel *struct {
			CloseSeconds *float64 `json:"closeSeconds"`
		} `json:"cancel"`
		GPUMemory struct {
			Sampled bool   `json:"sampled"`
			Reason  string `json:"reason"`
		} `json:"gpuMemory"`
		Findings []any `json:"findings"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
	}
	if len(rep.Levels) != 2 || rep.Levels[1].MaxRunning != 2 || rep.Cancel == nil || rep.Cancel.CloseSeconds == nil || len(rep.Findings) != 0 {
		t.Errorf("report: %s", stdout)
	}
	if !rep.GPUMemory.Sampled && !strings.HasPrefix(rep.GPUMemory.Reason, "NVML unavailable (") {
		t.Errorf("GPU memory: %+v", rep.GPUMemory)
	}
	for _, f := range []string{"report.md", "report.json", "timeline.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(stderr, "verify: level 2, batch 1/1: 2 running, 0 waiting") {
		t.Errorf("no progress line on stderr")
	}

	// A lock of 1 on the cluster's templates, which the policy does not
	// take (Kueue alone gates): two submitted together run one at a time,
	// fewer than predicted.
	if err := clustertest.Deploy(ctx, c, clustertest.WithLock(p, "main", 1)); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = gpupolicy(t, "verify", "--env", "local", "--kubeconfig", c.Kubeconfig(), "--levels", "2", "--batches", "1",
		"--hold", "5s", "-o", "markdown")
	if code != 1 {
		t.Fatalf("lock 1 on the cluster: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"— FAIL", "`fewer-at-once` level 2, batch 1: at most 1 of 2 ran at once"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("markdown lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "verify: 1 disagreement(s) with the policy on environment local") {
		t.Errorf("stderr: %s", stderr)
	}
}
