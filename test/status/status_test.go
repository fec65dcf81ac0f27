package status_test

// Acceptance tests of gpupolicy status on the local lab cluster (package
// cluster): a real kube-apiserver, Kueue and Argo's workflow-controller,
// the GPU node simulated by KWOK. Each test builds its scenario for real —
// Workflows through the rendered WorkflowTemplate, the 7B as a pod through
// its queue — and asserts the verdict and its evidence.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/internal/status"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
	"github.com/gpupolicy/gpupolicy/verify"
)

func TestMain(m *testing.M) { os.Exit(clustertest.Main(m)) }

const (
	jobNS     = "experiments"
	template  = "gpu-step-no-cache"
	testLabel = "gpupolicy.dev/status-test"
	sevenB    = "qwen2-5-7b"
)

func labPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := clustertest.LabPolicy()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// allStarted: every running job's pod has started, so its deadline is known.
func allStarted(r *status.Report) bool {
	for _, j := range r.Running {
		if j.Deadline == nil {
			return false
		}
	}
	return true
}

// lab deploys the lab with the main lock at lock (0: as policies/lab has
// it, no lock: Kueue alone gates), always-on models up, the 7B down, and
// nothing left of an earlier test.
func lab(t *testing.T, ctx context.Context, lock int64) (*cluster.Cluster, *policy.Policy) {
	t.Helper()
	c := clustertest.Shared(t)
	p := labPolicy(t)
	if lock > 0 {
		p = clustertest.WithLock(p, "main", lock)
	}
	if err := clustertest.LabUp(ctx, c, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanup(t, c, p) })
	return c, p
}

// cleanup deletes the test's Workflows and outside pods, stops the 7B and
// waits until their pods are gone.
func cleanup(t *testing.T, c *cluster.Cluster, p *policy.Policy) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: testLabel}
	bg := metav1.DeletePropagationBackground
	_ = c.Dynamic().Resource(contract.GVRWorkflow).Namespace(jobNS).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, sel)
	_ = c.Clientset().CoreV1().Pods(jobNS).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, sel)
	_ = c.Clientset().CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, sel)
	llm := p.Services[sevenB].Namespace
	_ = c.Clientset().AppsV1().Deployments(llm).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, sel)
	if err := clustertest.StopService(ctx, c, p, sevenB); err != nil {
		t.Error(err)
	}
	err := clustertest.Poll(ctx, "test pods gone", func(ctx context.Context) (bool, error) {
		n := 0
		for _, ns := range []string{jobNS, "default", llm} {
			l, err := c.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			n += len(l.Items)
		}
		return n == 0, nil
	})
	if err != nil {
		t.Error(err)
	}
}

// submit creates a job through the cache-free template at a priority; its
// pod runs for runSeconds on the simulated node.
func submit(t *testing.T, ctx context.Context, c *cluster.Cluster, name, priority string, runSeconds int) {
	t.Helper()
	labels := map[string]string{testLabel: "1"}
	wf := &wfv1.Workflow{
		TypeMeta:   metav1.TypeMeta{APIVersion: contract.ArgoAPIVersion, Kind: "Workflow"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: jobNS, Labels: labels},
		Spec: wfv1.WorkflowSpec{
			WorkflowTemplateRef: &wfv1.WorkflowTemplateRef{Name: template},
			Arguments:           wfv1.Arguments{Parameters: []wfv1.Parameter{{Name: contract.ParamPriority, Value: wfv1.AnyStringPtr(priority)}}},
			PodMetadata:         &wfv1.Metadata{Labels: labels, Annotations: map[string]string{verify.AnnotationRunSeconds: fmt.Sprint(runSeconds)}},
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(wf)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	if _, err := c.Dynamic().Resource(contract.GVRWorkflow).Namespace(jobNS).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// analyze reads the cluster and analyzes it as gpupolicy status does.
func analyze(ctx context.Context, c *cluster.Cluster, p *policy.Policy) (*status.Report, error) {
	predict, err := verify.AdmissionPredictor(p)
	if err != nil {
		return nil, err
	}
	kc, err := kube.ForConfig(c.RESTConfig()) // the clients as the verb builds them
	if err != nil {
		return nil, err
	}
	obs, err := status.Read(ctx, status.Clients{Dynamic: kc.Dynamic, REST: kc.REST}, p)
	if err != nil {
		return nil, err
	}
	return status.Analyze(status.Input{Policy: p, Environment: clustertest.Env, Predict: predict}, obs), nil
}

// await analyzes until cond holds, and returns that report.
func await(t *testing.T, ctx context.Context, c *cluster.Cluster, p *policy.Policy, what string, cond func(*status.Report) bool) *status.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var r *status.Report
	clustertest.WaitFor(t, ctx, what, func(ctx context.Context) (bool, error) {
		var err error
		r, err = analyze(ctx, c, p)
		return err == nil && cond(r), err
	})
	var b strings.Builder
	_ = r.WriteText(&b)
	t.Log("\n" + b.String())
	return r
}

func verdict(r *status.Report, wf string) *status.Verdict {
	for i := range r.Waiting {
		if r.Waiting[i].Workflow == wf {
			return &r.Waiting[i]
		}
	}
	return nil
}

func count(r *status.Report, reason string) int {
	n := 0
	for _, v := range r.Waiting {
		if v.Reason == reason {
			n++
		}
	}
	return n
}

// lastRequestKey is where the tests' idle scaler (standing in for the
// gateway that wakes the 7B) records its last request. policies/lab names
// none: the write-ups do not say what records it.
const lastRequestKey = "lab.internal/last-request"

// withLastActivity returns a copy of p whose 7B's last request is read
// where la says.
func withLastActivity(p *policy.Policy, la policy.LastActivity) *policy.Policy {
	q := *p
	q.Services = maps.Clone(p.Services)
	s := q.Services[sevenB]
	s.LastActivity = la
	q.Services[sevenB] = s
	return &q
}

// upSevenB starts the 7B as a pod and stamps its last request in the
// annotation lastRequestKey on it, as p's lastActivity says.
func upSevenB(t *testing.T, ctx context.Context, c *cluster.Cluster, p *policy.Policy, last time.Time) {
	t.Helper()
	if err := clustertest.StartService(ctx, c, p, sevenB); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, lastRequestKey, last.UTC().Format(time.RFC3339))
	if _, err := c.Clientset().CoreV1().Pods(p.Services[sevenB].Namespace).Patch(ctx, sevenB, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The 7B up starves batch jobs: Kueue holds them on declared GPU memory
// (404 MiB left, the 7B borrowing 12,200 MiB) until the 7B scales down an
// hour after its last request.
func TestSevenBStarvesBatch(t *testing.T) {
	ctx := context.Background()
	c, p := lab(t, ctx, 4)
	p = withLastActivity(p, policy.LastActivity{On: policy.LastActivityOnPod, Annotation: lastRequestKey, Format: policy.TimeRFC3339})
	last := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	upSevenB(t, ctx, c, p, last)
	submit(t, ctx, c, "starved-1", "batch", 600)
	submit(t, ctx, c, "starved-2", "batch", 600)
	r := await(t, ctx, c, p, "two batch jobs held by Kueue", func(r *status.Report) bool {
		v := verdict(r, "starved-1")
		return count(r, status.ReasonQuota) == 2 && v != nil && v.Quota != nil && v.Quota.KueueMessage != ""
	})
	v := verdict(r, "starved-1")
	if v == nil || v.Where != status.InKueue || v.Quota == nil {
		t.Fatalf("starved-1: want a Kueue verdict, got %+v", v)
	}
	q := v.Quota
	if len(q.Binding) != 1 || q.Binding[0] != p.DeclarationResource {
		t.Errorf("binding = %v, want [%s]", q.Binding, p.DeclarationResource)
	}
	if got := q.Available[p.DeclarationResource]; got != "404Mi" {
		t.Errorf("GPU memory left = %s, want 404Mi", got)
	}
	if len(q.Holders) == 0 || q.Holders[0].Service != sevenB || !q.Holders[0].Borrowing || q.Holders[0].Uses[p.DeclarationResource] != "12200Mi" {
		t.Errorf("first holder = %+v, want the 7B borrowing 12200Mi", q.Holders)
	}
	if !strings.Contains(q.KueueMessage, p.DeclarationResource) {
		t.Errorf("Kueue's message %q does not name %s", q.KueueMessage, p.DeclarationResource)
	}
	if !strings.Contains(q.Preemption, "no preemption path at batch") {
		t.Errorf("preemption = %q", q.Preemption)
	}
	want := last.Add(time.Hour)
	if v.Until.Kind != status.UntilScaleDown || v.Until.At == nil || !v.Until.At.Equal(want) || !v.Until.WhileRequestsArrive {
		t.Errorf("until = %+v, want the scale-down at %s while requests arrive", v.Until, want.UTC())
	}
	if !strings.Contains(v.Until.Words, "indefinitely while requests keep arriving") || !strings.Contains(v.Until.Words, want.UTC().Format("15:04:05")) || v.Until.By != sevenB {
		t.Errorf("until words = %q by %q", v.Until.Words, v.Until.By)
	}
	for _, s := range r.Services {
		if s.Name == sevenB && (s.LastRequest == nil || !s.LastRequest.Equal(last) || s.LastRequestFrom != "annotation "+lastRequestKey+" (RFC 3339) on pod llm/"+sevenB) {
			t.Errorf("7B: last request %v from %q, want %s from the annotation on its pod", s.LastRequest, s.LastRequestFrom, last.UTC())
		}
	}
	if !v.Stuck || !r.IsStuck() {
		t.Error("a starved job must be stuck (exit 1)")
	}
	if len(r.Predictions) != 1 || r.Predictions[0].Predicted != 0 || r.Predictions[0].Running != 0 || !r.Predictions[0].Agrees {
		t.Errorf("predictions = %+v, want running 0 of a predicted 0", r.Predictions)
	}
}

// The lock full of batch jobs whose pods Kueue holds (7B up), and a
// training job behind them that Kueue itself would admit by reclaiming the
// 7B's share.
func TestLockHeldByHeldJobs(t *testing.T) {
	ctx := context.Background()
	c, p := lab(t, ctx, 4)
	upSevenB(t, ctx, c, p, time.Now().Add(-5*time.Minute))
	for i := 1; i <= 4; i++ {
		submit(t, ctx, c, fmt.Sprintf("held-%d", i), "batch", 600)
	}
	await(t, ctx, c, p, "four batch jobs held by Kueue", func(r *status.Report) bool { return count(r, status.ReasonQuota) == 4 })
	submit(t, ctx, c, "train-1", "training", 600)
	r := await(t, ctx, c, p, "the training job at the lock", func(r *status.Report) bool {
		v := verdict(r, "train-1")
		return v != nil && v.Where == status.AtLock
	})
	v := verdict(r, "train-1")
	if v.Reason != status.ReasonLockCapacity || v.Lock == nil || v.Lock.Lock != "main" || v.Lock.Size != 4 || v.Lock.HeldByKueue != 4 || len(v.Lock.Holders) != 4 {
		t.Fatalf("train-1 verdict = %+v lock %+v, want lock-capacity with 4 holders held by Kueue", v, v.Lock)
	}
	for _, h := range v.Lock.Holders {
		if !strings.HasPrefix(h.Workflow, "held-") || h.State != "held by Kueue" {
			t.Errorf("holder %+v", h)
		}
	}
	if v.Lock.KueueWould != "preempt" {
		t.Errorf("Kueue would %s the training job, want preempt (reclaiming the 7B's share)", v.Lock.KueueWould)
	}
	if v.Until.Kind != status.UntilScaleDown || !v.Stuck {
		t.Errorf("until %+v stuck %v: want the holders' wait (the 7B's scale-down), stuck", v.Until, v.Stuck)
	}
	if l := r.Locks; len(l) == 0 {
		t.Error("no lock usage")
	}
	for _, l := range r.Locks {
		if l.Lock == "main" && (l.Held != 4 || l.Waiting != 1) {
			t.Errorf("lock main: %+v, want 4 held, 1 waiting", l)
		}
	}
}

// earliestDeadline is the first running job's time limit, and its
// Workflow.
func earliestDeadline(r *status.Report) (*time.Time, string) {
	var first *time.Time
	var wf string
	for _, j := range r.Running {
		if j.Deadline != nil && (first == nil || j.Deadline.Before(*first)) {
			first, wf = j.Deadline, j.Workflow
		}
	}
	return first, wf
}

// notebook runs a pod through the general queue's LocalQueue at batch
// priority with a GPU step's request and no time limit, as a notebook
// started by hand in the experiments namespace would.
func notebook(t *testing.T, ctx context.Context, c *cluster.Cluster, p *policy.Policy, name string) {
	t.Helper()
	tmpl := p.Templates["gpu-step"]
	rl := corev1.ResourceList{}
	for _, k := range policy.Kinds {
		rl[corev1.ResourceName(p.Resource(k))] = k.Quantity(tmpl.Request.Get(k))
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: jobNS, Labels: map[string]string{testLabel: "1",
			contract.LabelKueueQueue: p.Queues[tmpl.Queue].LocalQueue, contract.LabelKueuePriority: "batch"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "lab.local/notebook:latest",
			Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}}},
	}
	if _, err := c.Clientset().CoreV1().Pods(jobNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The quota full with the binding resource named: four pods with no time
// limit (notebooks started through the queue) hold the shares and host
// memory the always-on models leave; a batch job waits in Kueue, and
// nothing the policy bounds frees it.
func TestQuotaFull(t *testing.T) {
	ctx := context.Background()
	c, p := lab(t, ctx, 0)
	for i := 1; i <= 4; i++ {
		notebook(t, ctx, c, p, fmt.Sprintf("notebook-%d", i))
	}
	await(t, ctx, c, p, "the notebooks holding quota", func(r *status.Report) bool {
		for _, q := range r.Queues {
			if q.Queue == "gpu-general" {
				return q.Admitted == 8 // the four always-on models and the four notebooks
			}
		}
		return false
	})
	submit(t, ctx, c, "full-1", "batch", 600)
	r := await(t, ctx, c, p, "the batch job held by Kueue behind the notebooks", func(r *status.Report) bool {
		v := verdict(r, "full-1")
		return v != nil && v.Quota != nil && v.Quota.KueueMessage != "" && len(v.Quota.Holders) >= 8
	})
	v := verdict(r, "full-1")
	if v.Where != status.InKueue || v.Reason != status.ReasonQuota {
		t.Fatalf("verdict = %+v, want quota in Kueue", v)
	}
	if got := strings.Join(v.Quota.Binding, ","); got != "nvidia.com/gpu,memory" {
		t.Errorf("binding = %s, want nvidia.com/gpu,memory", got)
	}
	if !strings.Contains(v.Quota.KueueMessage, "insufficient unused quota for nvidia.com/gpu in flavor rtx-5060-ti") {
		t.Errorf("Kueue's message = %q", v.Quota.KueueMessage)
	}
	notebooks := 0
	for _, h := range v.Quota.Holders {
		if strings.HasPrefix(h.Name, "Workload "+jobNS+"/pod-notebook-") && h.Queue == "gpu-general" && h.Priority == "batch" && h.Workflow == "" {
			notebooks++
		}
	}
	if notebooks != 4 {
		t.Errorf("holders = %+v, want the 4 notebooks among them", v.Quota.Holders)
	}
	if v.Until.Kind != status.UntilNever || !strings.Contains(v.Until.Words, "no end the policy bounds") {
		t.Errorf("until = %+v, want indefinitely", v.Until)
	}
	if !v.Stuck || !r.IsStuck() {
		t.Error("a job behind quota nothing frees is stuck (exit 1)")
	}
}

// Simply next in line: the lab as it is (no Argo lock, Kueue alone
// gates), five batch jobs; four run (shares and host memory bind at four),
// the fifth waits in Kueue only for them and starts when the first ends.
func TestNextInLine(t *testing.T) {
	ctx := context.Background()
	c, p := lab(t, ctx, 0)
	for i := 1; i <= 5; i++ {
		submit(t, ctx, c, fmt.Sprintf("line-%d", i), "batch", 600)
	}
	r := await(t, ctx, c, p, "four running, one next in line in Kueue", func(r *status.Report) bool {
		return allStarted(r) && len(r.Running) == 4 && count(r, status.ReasonNextInLine) == 1 && len(r.Waiting) == 1 &&
			r.Waiting[0].Quota != nil && strings.Contains(r.Waiting[0].Quota.KueueMessage, "insufficient unused quota")
	})
	v := r.Waiting[0] // the one whose pod Kueue saw last (Argo creates the pods in its own order)
	if !strings.HasPrefix(v.Workflow, "line-") || v.Where != status.InKueue || v.Reason != status.ReasonNextInLine || v.Quota == nil {
		t.Fatalf("verdict = %+v", v)
	}
	if got := strings.Join(v.Quota.Binding, ","); got != "nvidia.com/gpu,memory" {
		t.Errorf("binding = %s, want nvidia.com/gpu,memory", got)
	}
	if !strings.Contains(v.Quota.KueueMessage, "insufficient unused quota") || v.Quota.Ahead != 0 {
		t.Errorf("Kueue's message %q, ahead %d", v.Quota.KueueMessage, v.Quota.Ahead)
	}
	jobs := 0
	for _, h := range v.Quota.Holders {
		if strings.HasPrefix(h.Workflow, "line-") && h.Workflow != v.Workflow && !h.Borrowing {
			jobs++
		}
	}
	if jobs != 4 {
		t.Errorf("holders = %+v, want the 4 running jobs among them", v.Quota.Holders)
	}
	first, firstWF := earliestDeadline(r)
	if first == nil {
		t.Fatalf("no running job's deadline: %+v", r.Running)
	}
	if v.Until.Kind != status.UntilTimeLimit || v.Until.At == nil || !v.Until.At.Equal(*first) || v.Until.By != "Workflow "+firstWF {
		t.Errorf("until = %+v, want Workflow %s's time limit %v", v.Until, firstWF, first)
	}
	for _, j := range r.Running {
		if j.Workflow == firstWF && first.Sub(*j.Started) != time.Hour {
			t.Errorf("time limit = %s, want the template's 3600 s", first.Sub(*j.Started))
		}
	}
	ev := strings.Join(v.Evidence, "\n")
	if !strings.Contains(ev, "running jobs of gpu-general hold nvidia.com/gpu, memory within its nominal quota; it is admitted when Workflow "+firstWF) {
		t.Errorf("evidence:\n%s", ev)
	}
	if !strings.HasPrefix(v.Summary, "next in line in Kueue: gpu-general is short of nvidia.com/gpu") {
		t.Errorf("summary = %q", v.Summary)
	}
	if v.Stuck || r.IsStuck() {
		t.Error("next in line is not stuck")
	}
	if len(r.Predictions) != 1 || r.Predictions[0].Running != 4 || r.Predictions[0].Predicted != 4 || !r.Predictions[0].Agrees {
		t.Errorf("predictions = %+v, want running 4 of a predicted 4", r.Predictions)
	}
}

// Next in line at a lock: the write-ups' series, the lock of 4 held by
// four running jobs, a fifth waits for a slot.
func TestNextInLineAtLock(t *testing.T) {
	ctx := context.Background()
	c, p := lab(t, ctx, 4)
	for i := 1; i <= 5; i++ {
		submit(t, ctx, c, fmt.Sprintf("line-%d", i), "batch", 600)
		time.Sleep(300 * time.Millisecond)
	}
	r := await(t, ctx, c, p, "four running, one at the lock", func(r *status.Report) bool {
		return allStarted(r) && len(r.Running) == 4 && count(r, status.ReasonNextInLine) == 1
	})
	v := r.Waiting[0]
	if v.Where != status.AtLock || v.Lock == nil || v.Lock.Position != 1 || v.Lock.HeldByKueue != 0 || len(v.Lock.Holders) != 4 {
		t.Fatalf("verdict = %+v lock %+v", v, v.Lock)
	}
	for _, h := range v.Lock.Holders {
		if h.State != "running" {
			t.Errorf("holder %+v, want running", h)
		}
	}
	first, firstWF := earliestDeadline(r)
	if v.Until.Kind != status.UntilTimeLimit || v.Until.At == nil || first == nil || !v.Until.At.Equal(*first) || v.Until.By != "Workflow "+firstWF {
		t.Errorf("until = %+v, want Workflow %s's time limit", v.Until, firstWF)
	}
	if v.Stuck || r.IsStuck() {
		t.Error("next in line is not stuck")
	}
}

// A pod Pending on the node: a pod outside Kueue takes four shares, Kueue
// admits a batch job (its quota has room), the scheduler has none.
func TestPendingOnNode(t *testing.T) {
	ctx := context.Background()
	c, p := lab(t, ctx, 4)
	rl := corev1.ResourceList{corev1.ResourceName(p.Resource(policy.Shares)): resource.MustParse("4")}
	outside := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "outside-kueue", Namespace: "default", Labels: map[string]string{testLabel: "1"}},
		// On the lab card's node, as a pod started by hand would be.
		Spec: corev1.PodSpec{NodeSelector: p.Cards["rtx-5060-ti"].NodeLabels, Containers: []corev1.Container{{Name: "main", Image: "lab.local/outside:latest",
			Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}}},
	}
	if _, err := c.Clientset().CoreV1().Pods("default").Create(ctx, outside, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, ctx, "the outside pod running", func(ctx context.Context) (bool, error) {
		pod, err := c.Clientset().CoreV1().Pods("default").Get(ctx, "outside-kueue", metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodRunning, err
	})
	submit(t, ctx, c, "node-1", "batch", 600)
	r := await(t, ctx, c, p, "the job pending on the node", func(r *status.Report) bool { return count(r, status.ReasonUnschedulable) == 1 })
	v := verdict(r, "node-1")
	if v == nil || v.Where != status.OnNode || v.Node == nil {
		t.Fatalf("verdict = %+v", v)
	}
	if !strings.Contains(v.Node.Message, "Insufficient nvidia.com/gpu") {
		t.Errorf("scheduler message = %q", v.Node.Message)
	}
	if len(v.Node.Outside) != 1 || !strings.Contains(v.Node.Outside[0], "default/outside-kueue") || !strings.Contains(v.Node.Outside[0], "takes 4 nvidia.com/gpu") {
		t.Errorf("outside = %v", v.Node.Outside)
	}
	if !v.Stuck || v.Until.Kind != status.UntilNever {
		t.Errorf("until %+v stuck %v", v.Until, v.Stuck)
	}
}
