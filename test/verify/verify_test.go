package verify_test

// Tests against the local lab cluster (package cluster): a real
// kube-apiserver, Kueue and Argo's workflow-controller, with the GPU node
// simulated by KWOK. They skip when the cluster's binaries are not built
// (`make cluster-build`); CI builds them.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
	"github.com/gpupolicy/gpupolicy/verify"
)

func TestMain(m *testing.M) { os.Exit(clustertest.Main(m)) }

// labCluster starts the shared cluster on first use, or skips.
func labCluster(t *testing.T) *cluster.Cluster { return clustertest.Shared(t) }

// clients are verify's clients as the verb builds them (kube.ForConfig).
func clients(t testing.TB, c *cluster.Cluster) verify.Clients {
	t.Helper()
	kc, err := kube.ForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return verify.Clients{Dynamic: kc.Dynamic, REST: kc.REST}
}

// labUp deploys the lab with the main lock at lock, the always-on models
// up and the 7B down.
func labUp(t *testing.T, ctx context.Context, lock int64) (*cluster.Cluster, *policy.Policy) {
	t.Helper()
	c := labCluster(t)
	p := clustertest.WithLock(labPolicy(t), "main", lock)
	if err := clustertest.LabUp(ctx, c, p); err != nil {
		t.Fatal(err)
	}
	return c, p
}

// testLog adapts t.Logf to an io.Writer for the progress lines.
type testLog struct{ t *testing.T }

func (w testLog) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func options(t *testing.T, p *policy.Policy, runID string) verify.Options {
	predict, err := verify.AdmissionPredictor(p)
	if err != nil {
		t.Fatal(err)
	}
	return verify.Options{Policy: p, Environment: "local", Batches: 1, Hold: 8 * time.Second, Predict: predict,
		Progress: testLog{t}, RunID: runID, NoGPUMemory: true}
}

// leftovers lists everything of a run still on the cluster: Workflows,
// pods and ConfigMaps with its label, and Workloads of its pods.
func leftovers(t *testing.T, ctx context.Context, c *cluster.Cluster, runID string) []string {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: verify.LabelRun + "=" + runID}
	var out []string
	wfs, err := c.Dynamic().Resource(contract.GVRWorkflow).Namespace("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wfs.Items {
		out = append(out, "Workflow "+w.GetName())
	}
	pods, err := c.Clientset().CoreV1().Pods("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out = append(out, "Pod "+p.Name)
	}
	cms, err := c.Clientset().CoreV1().ConfigMaps("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		out = append(out, "ConfigMap "+cm.Name)
	}
	ws, err := verify.ListWorkloads(ctx, clients(t, c), "experiments")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if strings.Contains(w.Name, "gpv-"+runID) || strings.Contains(firstOwner(&w), "gpv-"+runID) {
			out = append(out, "Workload "+w.Name)
		}
	}
	return out
}

// eventually waits for a run's Workloads to go (the garbage collector
// removes them after their pods) and fails if anything is left.
func nothingLeft(t *testing.T, ctx context.Context, c *cluster.Cluster, runID string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var left []string
	for {
		left = leftovers(t, ctx, c, runID)
		if len(left) == 0 {
			return
		}
		select {
		case <-wctx.Done():
			t.Fatalf("left behind by run %s: %v", runID, left)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// reportDir is where a test writes its report: a temporary folder, or
// $GPUPOLICY_VERIFY_REPORT_DIR/TEST (kept, to look at).
func reportDir(t *testing.T) string {
	if d := os.Getenv("GPUPOLICY_VERIFY_REPORT_DIR"); d != "" {
		return filepath.Join(d, t.Name())
	}
	return filepath.Join(t.TempDir(), "report")
}

func writeReport(t *testing.T, r *verify.Report) {
	dir := reportDir(t)
	if err := verify.WriteDir(dir, r); err != nil {
		t.Fatal(err)
	}
	t.Logf("report in %s:\n%s", dir, verify.Text(r))
}

// TestVerifyLockFour: levels 1 to 5 with the main lock at 4 and the 7B
// down. Never more than 4 run at once; the fifth of five waits and starts
// after one of the first four ends.
func TestVerifyLockFour(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	c, p := labUp(t, ctx, 4)
	o := options(t, p, "lk4a")
	o.Levels = []int{1, 2, 3, 4, 5}
	// Long enough that four jobs submitted together overlap even when a
	// loaded machine staggers their starts by a few seconds.
	o.Hold = 12 * time.Second
	r, err := verify.Run(ctx, clients(t, c), o)
	if err != nil {
		t.Fatal(err)
	}
	writeReport(t, r)
	if !r.OK() {
		t.Fatalf("findings: %v", r.Findings)
	}
	if r.MaxRunning != 4 {
		t.Errorf("most running at once %d, want 4", r.MaxRunning)
	}
	for _, l := range r.Levels {
		if want := min(l.Level, 4); l.MaxRunning != want || l.Predicted != want || l.Completed != l.Level {
			t.Errorf("level %d: ran %d at once (predicted %d), %d completed; want %d at once and all completed", l.Level, l.MaxRunning, l.Predicted, l.Completed, want)
		}
	}
	b5 := r.Batches[len(r.Batches)-1]
	if b5.Level != 5 {
		t.Fatalf("last batch is level %d", b5.Level)
	}
	var firstEnd time.Time
	last := b5.Jobs[0]
	for _, j := range b5.Jobs {
		if firstEnd.IsZero() || j.Ended.Before(firstEnd) {
			firstEnd = j.Ended
		}
		if j.Started().After(last.Started()) {
			last = j
		}
	}
	if last.Started().Before(firstEnd) {
		t.Errorf("the fifth job (%s) started at %s, before the first end at %s", last.Name, last.Started(), firstEnd)
	}
	if r.LoneRatePerMin == nil || r.MedianGapSeconds == nil {
		t.Errorf("no lone rate or median gap: %+v", r)
	}
	if !strings.Contains(r.GPUMemory.Sentence(), "GPU memory not sampled") {
		t.Errorf("GPU memory: %s", r.GPUMemory.Sentence())
	}
	nothingLeft(t, ctx, c, o.RunID)
}

// TestVerifyLockOne: with the lock at 1, strictly one at a time.
func TestVerifyLockOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c, p := labUp(t, ctx, 1)
	t.Cleanup(func() {
		if err := clustertest.Deploy(context.Background(), c, labPolicy(t)); err != nil {
			t.Error(err)
		}
	})
	o := options(t, p, "lk1a")
	o.Levels = []int{3}
	o.Hold = 5 * time.Second
	r, err := verify.Run(ctx, clients(t, c), o)
	if err != nil {
		t.Fatal(err)
	}
	writeReport(t, r)
	if !r.OK() {
		t.Fatalf("findings: %v", r.Findings)
	}
	if r.MaxRunning != 1 || r.Levels[0].Predicted != 1 {
		t.Errorf("ran %d at once, predicted %d; want 1 and 1", r.MaxRunning, r.Levels[0].Predicted)
	}
	if r.Lock == nil || r.Lock.Size != 1 || r.Lock.Live == nil || *r.Lock.Live != 1 {
		t.Errorf("lock: %+v", r.Lock)
	}
	if len(r.Levels[0].Gaps) != 2 {
		t.Errorf("gaps: %+v", r.Levels[0].Gaps)
	}
	nothingLeft(t, ctx, c, o.RunID)
}

// TestVerify7BUp: with the 7B up, batch jobs are not admitted; verify
// watches them wait and reports the starvation explain predicted.
func TestVerify7BUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c, p := labUp(t, ctx, 4)
	if err := clustertest.StartService(ctx, c, p, "qwen2-5-7b"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := clustertest.StopService(context.Background(), c, p, "qwen2-5-7b"); err != nil {
			t.Error(err)
		}
	})
	st, err := verify.ReadState(ctx, clients(t, c), p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Services["qwen2-5-7b"] != "up" || len(st.Notes) != 0 {
		t.Fatalf("state: %+v", st)
	}
	o := options(t, p, "q7up")
	o.Levels = []int{2, 3}
	o.StarveWatch = 20 * time.Second
	r, err := verify.Run(ctx, clients(t, c), o)
	if err != nil {
		t.Fatal(err)
	}
	writeReport(t, r)
	if !r.OK() {
		t.Fatalf("findings: %v", r.Findings)
	}
	if len(r.Batches) != 1 || r.Batches[0].StarveWatchSeconds < 20 || r.Batches[0].Predicted.Admitted != 0 {
		t.Fatalf("batches: %+v", r.Batches)
	}
	for _, j := range r.Batches[0].Jobs {
		if j.Outcome != verify.Waiting || !j.Admitted.IsZero() {
			t.Errorf("job %s: %s, admitted %v", j.Name, j.Outcome, j.Admitted)
		}
	}
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"as predicted with qwen2-5-7b up, no batch job was admitted", "404Mi left", "explain predicted it: batch jobs", "ran no other level"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	nothingLeft(t, ctx, c, o.RunID)
}

// TestVerifyCancel: --cancel stops one running job of a batch of five
// (four run, one waits); it closes, the waiting job takes its place, and
// the others finish.
func TestVerifyCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c, p := labUp(t, ctx, 4)
	o := options(t, p, "cnla")
	o.Levels = []int{1}
	o.Cancel = true
	o.Hold = 12 * time.Second
	// The default grace (45 s): the simulated node ends the terminated
	// step's pod itself, as a kubelet would on SIGTERM; verify's deletion
	// after the grace is for a pod that ignores it.
	r, err := verify.Run(ctx, clients(t, c), o)
	if err != nil {
		t.Fatal(err)
	}
	writeReport(t, r)
	if !r.OK() {
		t.Fatalf("findings: %v", r.Findings)
	}
	cs := r.Cancel
	if cs == nil || cs.CloseSeconds == nil || cs.HandoffSeconds == nil {
		t.Fatalf("cancel: %+v", cs)
	}
	if cs.Others != 4 || cs.OthersSucceeded != 4 || cs.Next == "" || cs.NextStarted.Before(cs.Closed.Truncate(time.Second)) {
		t.Errorf("cancel: %+v", cs)
	}
	if *cs.CloseSeconds > 10 {
		t.Errorf("closed in %.1f s", *cs.CloseSeconds)
	}
	nothingLeft(t, ctx, c, o.RunID)
}

// TestVerifyCancelFreshCluster is --cancel as a new user first runs it: on
// a fresh local cluster the always-on services are not running, so the
// queue admits six and only the lock (4) stands between the jobs. The
// simulated node ends the terminated step's pod as a kubelet would on
// SIGTERM (no pod deletion by verify), the prediction is for the state
// observed (without the always-on services), and if the job behind the
// cancelled one starts while that one still runs, it is reported once, as
// started-beside-cancelled with its cause (Argo released the lock before
// the pod stopped), not as more-at-once or did-not-wait.
func TestVerifyCancelFreshCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c, p := labUp(t, ctx, 4)
	var alwaysOn []string
	for _, n := range p.ServiceNames() {
		if p.Services[n].Mode == policy.AlwaysOn {
			alwaysOn = append(alwaysOn, n)
			if err := clustertest.StopService(ctx, c, p, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The pods are gone; wait for Kueue to finish their Workloads.
	clustertest.WaitFor(t, ctx, "always-on services holding no quota", func(ctx context.Context) (bool, error) {
		st, err := verify.ReadState(ctx, clients(t, c), p)
		return err == nil && len(st.AlwaysOnAbsent) == len(alwaysOn), err
	})
	t.Cleanup(func() {
		for _, n := range alwaysOn {
			if err := clustertest.StartService(context.Background(), c, p, n); err != nil {
				t.Error(err)
			}
		}
	})
	o := options(t, p, "cnfr")
	o.Levels = []int{1}
	o.Cancel = true
	o.Hold = 12 * time.Second
	r, err := verify.Run(ctx, clients(t, c), o)
	if err != nil {
		t.Fatal(err)
	}
	writeReport(t, r)
	cb := r.Batches[len(r.Batches)-1]
	if cb.Kind != verify.CancelBatch || strings.Join(cb.State.AlwaysOnAbsent, ",") != strings.Join(alwaysOn, ",") {
		t.Fatalf("cancel batch state: %+v", cb.State)
	}
	if pr := cb.Predicted; pr.Admitted != 4 || pr.QuotaAdmits != 6 || len(pr.WithoutAlwaysOn) != len(alwaysOn) {
		t.Errorf("prediction for the observed state: %+v", pr)
	}
	cs := r.Cancel
	if cs == nil || cs.CloseSeconds == nil || cs.LockReleased.IsZero() {
		t.Fatalf("cancel: %+v", cs)
	}
	if cs.ClosedBy != "argo" || *cs.CloseSeconds > 15 {
		t.Errorf("the simulated node did not end the terminated pod itself: closed by %q in %.1f s", cs.ClosedBy, *cs.CloseSeconds)
	}
	if cs.Others != 4 || cs.OthersSucceeded != 4 {
		t.Errorf("cancel: %+v", cs)
	}
	for _, f := range r.Findings {
		if f.Rule != verify.CheckCancelOverlap || !strings.Contains(f.Message, "Argo released the lock main when it marked the terminated Workflow failed") ||
			!strings.Contains(f.Message, "the queue had room (it admits 6") {
			t.Errorf("finding without its cause: %s", f)
		}
	}
	t.Logf("findings: %v", r.Findings)
	nothingLeft(t, ctx, c, o.RunID)
}

// TestVerifyCleanupOnInterrupt: a run cut short (Ctrl-C) deletes
// everything it created; so does one that reaches its timeout.
func TestVerifyCleanupOnInterrupt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c, p := labUp(t, ctx, 4)

	o := options(t, p, "intr")
	o.Levels = []int{5}
	o.Hold = time.Minute
	rctx, stop := context.WithCancel(ctx)
	go func() {
		// Interrupt once four are running.
		for rctx.Err() == nil {
			pods, err := c.Clientset().CoreV1().Pods("experiments").List(rctx, metav1.ListOptions{LabelSelector: verify.LabelRun + "=intr"})
			n := 0
			if err == nil {
				for _, p := range pods.Items {
					if p.Status.Phase == corev1.PodRunning {
						n++
					}
				}
			}
			if n == 4 {
				stop()
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	r, err := verify.Run(rctx, clients(t, c), o)
	stop()
	if !errors.Is(err, verify.ErrInterrupted) || r == nil {
		t.Fatalf("interrupted run: %v", err)
	}
	if r.Cleanup == nil || len(r.Cleanup.Deleted) == 0 || len(r.Cleanup.Left) != 0 {
		t.Errorf("cleanup: %+v", r.Cleanup)
	}
	nothingLeft(t, ctx, c, o.RunID)

	o = options(t, p, "tmot")
	o.Levels = []int{2}
	o.Hold = time.Minute
	o.Timeout = 15 * time.Second
	r, err = verify.Run(ctx, clients(t, c), o)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() || !strings.Contains(strings.Join(ids(r.Findings), ","), verify.CheckUnfinished) {
		t.Errorf("timeout: findings %v", r.Findings)
	}
	nothingLeft(t, ctx, c, o.RunID)
}

func labPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.Load("../../policies/lab")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func firstOwner(w *kueue.Workload) string {
	for _, o := range w.OwnerReferences {
		return o.Name
	}
	return ""
}

func ids(fs []finding.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Rule)
	}
	return out
}
