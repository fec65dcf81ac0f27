package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
)

func TestParseLevels(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{"1,2,3,4,5", []int{1, 2, 3, 4, 5}, ""},
		{"1-5", []int{1, 2, 3, 4, 5}, ""},
		{"1-3, 5", []int{1, 2, 3, 5}, ""},
		{"4", []int{4}, ""},
		{"0", nil, "use 1 to 64"},
		{"x", nil, "not a number"},
		{"5-1", nil, "bad range"},
		{"", nil, "no level"},
	} {
		got, err := parseLevels(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseLevels(%q) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseLevels(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestVerifyUsage: usage errors and an unreachable cluster exit 2 with a
// message, before anything is submitted.
func TestVerifyUsage(t *testing.T) {
	dir := t.TempDir()
	unreachable := filepath.Join(dir, "kubeconfig")
	// A cluster on a port nothing listens on.
	if err := os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: nobody
  user: {token: x}
contexts:
- name: nowhere
  context: {cluster: nowhere, user: nobody}
current-context: nowhere
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verify"}, "--env ENV is required"},
		{[]string{"verify", "--env", "local", "-o", "yaml"}, "-o yaml: use one of text, json, markdown"},
		{[]string{"verify", "--env", "local", "--levels", "0"}, "use 1 to 64"},
		{[]string{"verify", "--env", "local", "--batches", "0"}, "--batches 0"},
		{[]string{"verify", "--env", "nosuch"}, `no environment "nosuch"`},
		{[]string{"verify", "--env", "local", "--kubeconfig", filepath.Join(dir, "absent")}, "make cluster-up"},
		{[]string{"verify", "--env", "local", "--kubeconfig", unreachable, "--levels", "1", "--batches", "1"}, "127.0.0.1:1"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != exitInput || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q, want nothing", tc.args, stdout.String())
		}
	}
}

// TestVerifyLocalCluster runs gpupolicy verify against the local lab
// cluster: the lab deployed as the policy says (exit 0, the report files
// written, the cancel timed), then with the main lock at 1 on the cluster
// while the policy says 4 (exit 1, naming the disagreement).
func TestVerifyLocalCluster(t *testing.T) {
	if err := cluster.Available(); err != nil {
		t.Skip(err)
	}
	if testing.Short() {
		t.Skip("-short: skipping tests that start the lab cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	p, err := policy.Load(filepath.Join("..", "..", defaultPolicyDir))
	if err != nil {
		t.Fatal(err)
	}
	if err := clustertest.LabUp(ctx, c, p); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "report")
	var stdout, stderr bytes.Buffer
	code := run([]string{"verify", "--env", "local", "--kubeconfig", c.Kubeconfig(), "--levels", "1,2", "--batches", "1",
		"--hold", "6s", "--cancel", "--cancel-grace", "2s", "--report", dir, "-o", "json"}, &stdout, &stderr)
	t.Logf("stderr:\n%s", stderr.String())
	if code != exitClean {
		t.Fatalf("exit %d, want 0\nstdout:\n%s", code, stdout.String())
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
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout.String())
	}
	if len(rep.Levels) != 2 || rep.Levels[1].MaxRunning != 2 || rep.Cancel == nil || rep.Cancel.CloseSeconds == nil || len(rep.Findings) != 0 {
		t.Errorf("report: %s", stdout.String())
	}
	if !rep.GPUMemory.Sampled && !strings.HasPrefix(rep.GPUMemory.Reason, "NVML unavailable (") {
		t.Errorf("GPU memory: %+v", rep.GPUMemory)
	}
	for _, f := range []string{"report.md", "report.json", "timeline.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(stderr.String(), "verify: level 2, batch 1/1: 2 running, 0 waiting") {
		t.Errorf("no progress line on stderr")
	}

	// The cluster's lock at 1, the policy's at 4: two submitted together
	// run one at a time, fewer than predicted.
	if err := clustertest.Deploy(ctx, c, clustertest.WithLock(p, "main", 1)); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	code = run([]string{"verify", "--env", "local", "--kubeconfig", c.Kubeconfig(), "--levels", "2", "--batches", "1",
		"--hold", "5s", "-o", "markdown"}, &stdout, &stderr)
	if code != exitFindings {
		t.Fatalf("lock 1 on the cluster: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"— FAIL", "`fewer-at-once` level 2, batch 1: at most 1 of 2 ran at once", "Lock main: 4 in the policy, 1 on the cluster."} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "verify: 1 disagreement(s) with the policy on environment local") {
		t.Errorf("stderr: %s", stderr.String())
	}
}
