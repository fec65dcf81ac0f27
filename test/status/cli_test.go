package status_test

// The gpupolicy binary, built as a user builds it, run against the local
// lab cluster as a read-only identity: the JSON contract and the exit
// status of `gpupolicy status` (README, "status -o json: the contract"),
// and --watch's change lines on a pipe.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/internal/status"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
)

// statusJSON is the part of the contract the tests read, by its JSON names.
type statusJSON struct {
	Environment string `json:"environment"`
	Policy      string `json:"policy"`
	Now         string `json:"now"`
	State       string `json:"state"`
	Services    []struct {
		Name            string     `json:"name"`
		Up              bool       `json:"up"`
		Since           *time.Time `json:"since"`
		LastRequest     *time.Time `json:"lastRequest"`
		LastRequestFrom string     `json:"lastRequestFrom"`
		ScaleDownAt     *time.Time `json:"scaleDownAt"`
	} `json:"services"`
	Running []struct {
		Workflow string     `json:"workflow"`
		Deadline *time.Time `json:"deadline"`
	} `json:"running"`
	Waiting []struct {
		Workflow string   `json:"workflow"`
		Where    string   `json:"where"`
		Reason   string   `json:"reason"`
		Summary  string   `json:"summary"`
		Evidence []string `json:"evidence"`
		Quota    *struct {
			Queue        string            `json:"queue"`
			Binding      []string          `json:"binding"`
			Available    map[string]string `json:"available"`
			KueueMessage string            `json:"kueueMessage"`
			Holders      []struct {
				Name      string `json:"name"`
				Service   string `json:"service"`
				Workflow  string `json:"workflow"`
				Borrowing bool   `json:"borrowing"`
			} `json:"holders"`
		} `json:"quota"`
		Until struct {
			Kind                string     `json:"kind"`
			At                  *time.Time `json:"at"`
			By                  string     `json:"by"`
			WhileRequestsArrive bool       `json:"whileRequestsArrive"`
			Words               string     `json:"words"`
		} `json:"until"`
		Stuck          bool   `json:"stuck"`
		WaitingSeconds *int64 `json:"waitingSeconds"`
	} `json:"waiting"`
	Predictions []struct {
		Running   int  `json:"running"`
		Predicted int  `json:"predicted"`
		Agrees    bool `json:"agrees"`
	} `json:"predictions"`
	Stuck *int `json:"stuck"`
}

// bin is the built binary, run in the repository root as a read-only
// identity against the policy in policyDir.
type bin struct {
	path, root, kubeconfig, policyDir string
}

// buildGpupolicy builds cmd/gpupolicy into a temporary directory, as a user
// builds it (go build).
func buildGpupolicy(t *testing.T, root string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "gpupolicy")
	build := exec.Command("go", "build", "-o", out, "./cmd/gpupolicy")
	build.Dir = root
	start := time.Now()
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gpupolicy: %v\n%s", err, b)
	}
	t.Logf("built gpupolicy in %s", time.Since(start).Round(100*time.Millisecond))
	return out
}

func (b bin) args(extra ...string) []string {
	return append([]string{"status", "--env", clustertest.Env, "--kubeconfig", b.kubeconfig, "--policy", b.policyDir}, extra...)
}

// run runs gpupolicy status once and returns its exit code, stdout and
// stderr.
func (b bin) run(t *testing.T, extra ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, b.path, b.args(extra...)...)
	cmd.Dir = b.root
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("running gpupolicy %v: %v", cmd.Args, err)
		}
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

func (b bin) json(t *testing.T, wantExit int) statusJSON {
	t.Helper()
	code, stdout, stderr := b.run(t, "-o", "json")
	if code != wantExit {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, wantExit, stdout, stderr)
	}
	var r statusJSON
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
	}
	if r.Environment != clustertest.Env || r.Policy != "lab" || r.Now == "" || r.Stuck == nil {
		t.Errorf("head: environment %q policy %q now %q stuck %v", r.Environment, r.Policy, r.Now, r.Stuck)
	}
	t.Logf("stderr: %s", stderr)
	return r
}

// labWithDeploymentActivity writes policies/lab plus a lastActivity for
// the 7B (a label in Unix seconds on its Deployment, as an idle scaler
// that scales the Deployment might stamp it) into a directory, and loads
// it.
func labWithDeploymentActivity(t *testing.T, root string) (string, *policy.Policy) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "policies", "lab"))); err != nil {
		t.Fatal(err)
	}
	activity := fmt.Sprintf("package lab\n\nservices: %q: lastActivity: {on: \"deployment\", label: %q, format: \"unix\"}\n", sevenB, lastRequestKey)
	if err := os.WriteFile(filepath.Join(dir, "activity.cue"), []byte(activity), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, p
}

// sevenBDeployment runs the 7B as a Deployment of one replica through its
// queue, its last request stamped on the Deployment, and waits until its
// pod's Workload holds quota.
func sevenBDeployment(t *testing.T, ctx context.Context, c *cluster.Cluster, p *policy.Policy, last time.Time) {
	t.Helper()
	s := p.Services[sevenB]
	rl := corev1.ResourceList{}
	for _, k := range policy.Kinds {
		rl[corev1.ResourceName(p.Resource(k))] = k.Quantity(s.Request.Get(k))
	}
	one := int32(1)
	sel := map[string]string{"app.kubernetes.io/name": sevenB}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: sevenB, Namespace: s.Namespace,
			Labels: map[string]string{testLabel: "1", lastRequestKey: fmt.Sprint(last.Unix())}},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": sevenB, testLabel: "1",
					contract.LabelKueueQueue: p.Queues[s.Queue].LocalQueue, contract.LabelKueuePriority: s.Priority}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "lab.local/" + sevenB + ":latest",
					Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}}},
			}},
	}
	if _, err := c.Clientset().AppsV1().Deployments(s.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, ctx, c, p, "the 7B's Deployment up", func(r *status.Report) bool { return r.State == sevenB+" up" })
}

// TestStatusBinary: the built binary as a read-only identity. The 7B up
// (a Deployment whose last request the policy reads from a label) starves
// a batch job: exit 1 and the JSON contract's fields. Then the lab as it
// is with five batch jobs, the fifth simply next in line: exit 0. Then
// --watch on a pipe prints, as lines, the change when a running job is
// deleted and the fifth is admitted, and stops cleanly on an interrupt.
func TestStatusBinary(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := clustertest.Shared(t)
	b := bin{path: buildGpupolicy(t, root), root: root}
	var p *policy.Policy
	b.policyDir, p = labWithDeploymentActivity(t, root)
	if err := clustertest.LabUp(ctx, c, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanup(t, c, p) })
	ro, err := c.ReadOnlyUser(ctx, "status-reader")
	if err != nil {
		t.Fatal(err)
	}
	b.kubeconfig = ro.Kubeconfig

	if !t.Run("starved", func(t *testing.T) {
		last := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
		sevenBDeployment(t, ctx, c, p, last)
		submit(t, ctx, c, "starved-1", "batch", 600)
		await(t, ctx, c, p, "the batch job held by Kueue", func(r *status.Report) bool {
			v := verdict(r, "starved-1")
			return v != nil && v.Quota != nil && v.Quota.KueueMessage != ""
		})
		r := b.json(t, 1)
		if r.State != sevenB+" up" || *r.Stuck != 1 || len(r.Waiting) != 1 {
			t.Fatalf("state %q stuck %d waiting %d", r.State, *r.Stuck, len(r.Waiting))
		}
		v := r.Waiting[0]
		if v.Workflow != "starved-1" || v.Where != "kueue" || v.Reason != "quota" || !v.Stuck || v.WaitingSeconds == nil || v.Quota == nil {
			t.Fatalf("verdict %+v", v)
		}
		if strings.Join(v.Quota.Binding, ",") != p.DeclarationResource || v.Quota.Available[p.DeclarationResource] != "404Mi" ||
			len(v.Quota.Holders) == 0 || v.Quota.Holders[0].Service != sevenB || !v.Quota.Holders[0].Borrowing {
			t.Errorf("quota %+v", v.Quota)
		}
		want := last.Add(time.Hour)
		if v.Until.Kind != "scale-down" || v.Until.At == nil || !v.Until.At.Equal(want) || v.Until.By != sevenB || !v.Until.WhileRequestsArrive {
			t.Errorf("until %+v, want the 7B's scale-down at %s", v.Until, want.UTC())
		}
		found := false
		for _, s := range r.Services {
			if s.Name != sevenB {
				continue
			}
			found = true
			if !s.Up || s.LastRequest == nil || !s.LastRequest.Equal(last) || s.ScaleDownAt == nil || !s.ScaleDownAt.Equal(want) ||
				!strings.HasPrefix(s.LastRequestFrom, "label "+lastRequestKey+" (Unix seconds) on Deployment llm/"+sevenB) {
				t.Errorf("7B %+v", s)
			}
		}
		if !found {
			t.Error("no 7B among the services")
		}
		if len(r.Predictions) != 1 || r.Predictions[0].Predicted != 0 || !r.Predictions[0].Agrees {
			t.Errorf("predictions %+v", r.Predictions)
		}
		code, stdout, stderr := b.run(t)
		if code != 1 || !strings.Contains(stdout, "STUCK  Workflow starved-1") || !strings.Contains(stderr, "1 job(s) starved or stuck beyond what the policy predicts") {
			t.Errorf("text: exit %d\n%s\n%s", code, stdout, stderr)
		}
	}) {
		return
	}
	cleanup(t, c, p)

	if !t.Run("next in line", func(t *testing.T) {
		for i := 1; i <= 5; i++ {
			submit(t, ctx, c, fmt.Sprintf("line-%d", i), "batch", 600)
		}
		await(t, ctx, c, p, "four running, one next in line in Kueue", func(r *status.Report) bool {
			return allStarted(r) && len(r.Running) == 4 && count(r, status.ReasonNextInLine) == 1 && len(r.Waiting) == 1 &&
				strings.Contains(r.Waiting[0].Quota.KueueMessage, "insufficient unused quota")
		})
		r := b.json(t, 0)
		if *r.Stuck != 0 || len(r.Running) != 4 || len(r.Waiting) != 1 {
			t.Fatalf("stuck %d running %d waiting %d", *r.Stuck, len(r.Running), len(r.Waiting))
		}
		v := r.Waiting[0]
		if v.Where != "kueue" || v.Reason != "next-in-line" || v.Stuck || v.Quota == nil || strings.Join(v.Quota.Binding, ",") != "nvidia.com/gpu,memory" {
			t.Fatalf("verdict %+v", v)
		}
		var first *time.Time
		var firstWF string
		for _, j := range r.Running {
			if j.Deadline != nil && (first == nil || j.Deadline.Before(*first)) {
				first, firstWF = j.Deadline, j.Workflow
			}
		}
		if v.Until.Kind != "time-limit" || first == nil || v.Until.At == nil || !v.Until.At.Equal(*first) || v.Until.By != "Workflow "+firstWF {
			t.Errorf("until %+v, want Workflow %s's time limit", v.Until, firstWF)
		}
		if len(r.Predictions) != 1 || r.Predictions[0].Running != 4 || r.Predictions[0].Predicted != 4 || !r.Predictions[0].Agrees {
			t.Errorf("predictions %+v", r.Predictions)
		}
	}) {
		return
	}

	t.Run("watch", func(t *testing.T) {
		watch(t, b, c, p)
	})
}

// watch runs status --watch on a pipe in the next-in-line state: it prints
// the counts and the waiting job's verdict as lines, nothing while nothing
// changes, and, when a running job is deleted and Kueue admits the waiting
// one, the line that says so; an interrupt stops it with the last state's
// exit status (0: nothing stuck).
func watch(t *testing.T, b bin, c *cluster.Cluster, p *policy.Policy) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.Command(b.path, b.args("--watch", "--interval", "1s")...)
	cmd.Dir = b.root
	var stderr bytes.Buffer // read only after Wait
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	// stop interrupts the process (or kills it), reads the pipe to its
	// end and waits: bounded by drainFor.
	exited := false
	stop := func(sig os.Signal) int {
		if exited {
			return cmd.ProcessState.ExitCode()
		}
		exited = true
		_ = cmd.Process.Signal(sig)
		timeout := time.After(30 * time.Second)
	drain:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break drain
				}
				seen = append(seen, l)
			case <-timeout:
				_ = cmd.Process.Kill()
				t.Errorf("gpupolicy status --watch did not stop within 30 s of %v", sig)
				timeout = nil
			}
		}
		_ = cmd.Wait()
		return cmd.ProcessState.ExitCode()
	}
	defer stop(os.Kill)
	fail := func(format string, args ...any) {
		t.Helper()
		stop(os.Kill)
		t.Fatalf(format+"\nlines:\n%s\nstderr:\n%s", append(args, strings.Join(seen, "\n"), stderr.String())...)
	}
	next := func(what string, match func(string) bool) string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					fail("the watch ended before %s", what)
				}
				seen = append(seen, l)
				if match(l) {
					t.Logf("watch: %s", l)
					return l
				}
			case <-ctx.Done():
				fail("no %s within the time", what)
			}
		}
	}
	next("the counts line", func(l string) bool { return strings.HasSuffix(l, "; 4 running, 1 waiting, 0 stuck") })
	line := next("the waiting job's line", func(l string) bool {
		return strings.Contains(l, " waits in Kueue (next-in-line): next in line in Kueue: ")
	})
	_, rest, _ := strings.Cut(line, " Workflow ")
	waiting, _, _ := strings.Cut(rest, " ")
	// Nothing changes: no line in three refreshes.
	select {
	case l := <-lines:
		seen = append(seen, l)
		fail("a line while nothing changed: %q", l)
	case <-time.After(3500 * time.Millisecond):
	}
	r, err := analyze(ctx, c, p)
	if err != nil || len(r.Running) == 0 {
		fail("reading the running jobs: %v", err)
	}
	bg := metav1.DeletePropagationBackground
	if err := c.Dynamic().Resource(contract.GVRWorkflow).Namespace(jobNS).Delete(ctx, r.Running[0].Workflow, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		fail("deleting Workflow %s: %v", r.Running[0].Workflow, err)
	}
	start := time.Now()
	next("the admitted job's line", func(l string) bool { return strings.HasSuffix(l, " Workflow "+waiting+" no longer waits") })
	t.Logf("Workflow %s deleted; %s admitted and reported after %s", r.Running[0].Workflow, waiting, time.Since(start).Round(100*time.Millisecond))
	if code := stop(os.Interrupt); code != 0 {
		t.Errorf("exit %d after the interrupt, want 0 (nothing stuck)\nlines:\n%s\nstderr:\n%s", code, strings.Join(seen, "\n"), stderr.String())
	}
	for _, l := range seen {
		if !timeLine(l) {
			t.Errorf("line %q does not start with the time", l)
		}
	}
}

// timeLine: "15:04:05 ...".
func timeLine(l string) bool {
	_, err := time.Parse("15:04:05", strings.SplitN(l, " ", 2)[0])
	return err == nil
}
