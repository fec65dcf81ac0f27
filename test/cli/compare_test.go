package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
)

// seriesPolicy writes the lab as the write-ups' series had it (the main
// lock, sized from the queue: 4, and the cache lock;
// cmd/gpupolicy/testdata/lab-series) into a directory of its own.
func seriesPolicy(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "lab-series")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{filepath.Join(repoRoot, "policies", "lab"), filepath.Join(repoRoot, "cmd", "gpupolicy", "testdata", "lab-series")} {
		files, err := filepath.Glob(filepath.Join(src, "*.cue"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// atPin checks that the cluster holds the local environment's render at
// its pin (the lab with Kueue alone): the cache-free template takes no
// semaphore and the semaphore ConfigMap is gone; and that nothing of the
// runs is left.
func atPin(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	wt, err := c.Dynamic().Resource(contract.GVRWorkflowTemplate).Namespace("experiments").Get(ctx, "gpu-step-no-cache", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sy, ok, _ := unstructured.NestedFieldNoCopy(wt.Object, "spec", "templates"); ok && strings.Contains(toJSON(sy), "semaphore") {
		t.Errorf("the restored template still takes a semaphore: %s", toJSON(sy))
	}
	if _, err := c.Clientset().CoreV1().ConfigMaps("experiments").Get(ctx, "gpu-semaphores", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the semaphore ConfigMap is still there after the restore (%v)", err)
	}
	pods, err := c.Clientset().CoreV1().Pods("experiments").List(ctx, metav1.ListOptions{LabelSelector: "gpupolicy.dev/verify-run"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Errorf("%d verify pod(s) left", len(pods.Items))
	}
}

// labUp starts (or reuses) the package's cluster and deploys the lab as it
// runs: policies/lab, the always-on models up, the 7B down.
func labUp(t *testing.T, ctx context.Context) (*cluster.Cluster, *policy.Policy) {
	t.Helper()
	c := clustertest.Shared(t)
	p, err := policy.Load(filepath.Join(repoRoot, "policies", "lab"))
	if err != nil {
		t.Fatal(err)
	}
	if err := clustertest.LabUp(ctx, c, p); err != nil {
		t.Fatal(err)
	}
	return c, p
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestVerifyCompareWith runs gpupolicy verify --compare-with against the
// local lab cluster: the series' policy (an Argo lock in front of Kueue)
// from a directory, then the environment's (Kueue alone), five submitted
// together under each, reported side by side, and the render at the pin
// put back (exit 0). A second run is interrupted (SIGINT) while the
// series' policy is deployed: it exits 2 and the render at the pin is put
// back all the same.
func TestVerifyCompareWith(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, _ := labUp(t, ctx)
	series := seriesPolicy(t)
	dir := filepath.Join(t.TempDir(), "report")
	code, stdout, stderr := gpupolicy(t, "verify", "--env", "local", "--kubeconfig", c.Kubeconfig(), "--levels", "5", "--batches", "1",
		"--hold", "3s", "--compare-with", series, "--report", dir, "-o", "json")
	t.Logf("stderr:\n%s", stderr)
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s", code, stdout)
	}
	var s struct {
		Policies []struct {
			Label, Source string
			Report        struct {
				Lock *struct {
					Name string
					Size int
				}
			}
		}
		Levels []struct {
			Level    int
			Policies []struct {
				MaxRunning, Predicted, Handoffs int
				BeforePodSeconds                *float64
			}
		}
		Restored struct {
			What string
			Done bool
		}
		Findings []any
	}
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("stdout is not the JSON result: %v\n%s", err, stdout)
	}
	if len(s.Policies) != 2 || s.Policies[0].Label != series || s.Policies[1].Label != "policies/lab" {
		t.Fatalf("policies: %+v", s.Policies)
	}
	if l := s.Policies[0].Report.Lock; l == nil || l.Name != "main" || l.Size != 4 {
		t.Errorf("the series' policy ran without its lock of 4: %+v", l)
	}
	if s.Policies[1].Report.Lock != nil {
		t.Errorf("the lab's policy ran with a lock: %+v", s.Policies[1].Report.Lock)
	}
	if len(s.Levels) != 1 || len(s.Levels[0].Policies) != 2 {
		t.Fatalf("levels: %+v", s.Levels)
	}
	for i, l := range s.Levels[0].Policies {
		if l.MaxRunning != 4 || l.Predicted != 4 || l.Handoffs != 1 || l.BeforePodSeconds == nil {
			t.Errorf("policy %d: %+v", i+1, l)
		}
	}
	if before := s.Levels[0].Policies; before[1].BeforePodSeconds != nil && before[0].BeforePodSeconds != nil && *before[1].BeforePodSeconds >= *before[0].BeforePodSeconds {
		t.Errorf("before the next pod: %.1f s with Kueue alone, %.1f s with the lock; want less without the lock", *before[1].BeforePodSeconds, *before[0].BeforePodSeconds)
	}
	if !s.Restored.Done || !strings.HasPrefix(s.Restored.What, "the render at the pin ") || len(s.Findings) != 0 {
		t.Errorf("restored %+v, findings %v", s.Restored, s.Findings)
	}
	for _, f := range []string{"report.md", "report.json", "handoff.svg", "1-*/rates.svg", "2-policies-lab/timeline.svg"} {
		if m, _ := filepath.Glob(filepath.Join(dir, f)); len(m) != 1 {
			t.Errorf("the report folder has %d %s", len(m), f)
		}
	}
	for _, want := range []string{"reconciling its render", "reconciled its render", "restoring the render at the pin", "reconciled the render at the pin"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	atPin(t, ctx, c)

	// Interrupted while the series' batch runs.
	cmd := exec.Command(gpupolicyBin, "verify", "--env", "local", "--kubeconfig", c.Kubeconfig(), "--levels", "5", "--batches", "1",
		"--hold", "30s", "--compare-with", series)
	cmd.Dir = repoRoot
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(errPipe)
	interrupted := false
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if !interrupted && strings.Contains(sc.Text(), "verify: level 5, batch 1/1: 4 running") {
			interrupted = true
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	all := strings.Join(lines, "\n")
	t.Logf("interrupted run's stderr:\n%s", all)
	if !interrupted {
		t.Fatal("the series' batch never ran four at once, so it was not interrupted")
	}
	if cmd.ProcessState.ExitCode() != 2 {
		t.Errorf("interrupted: exit %d (%v), want 2", cmd.ProcessState.ExitCode(), err)
	}
	for _, want := range []string{"restoring the render at the pin", "reconciled the render at the pin", "verify interrupted"} {
		if !strings.Contains(all, want) {
			t.Errorf("interrupted run's stderr lacks %q", want)
		}
	}
	if strings.Contains(all, "policy 2 of 2") {
		t.Errorf("the second policy was deployed after the interrupt")
	}
	atPin(t, ctx, c)
}
