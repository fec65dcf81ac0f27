package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/verify"
)

// The scenarios of the acceptance tests (test/status), built from typed
// objects: the verdict logic without a cluster.

var t0 = time.Date(2026, 11, 3, 14, 0, 0, 0, time.UTC)

const semKey = "experiments/ConfigMap/gpu-semaphore/"

func labPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.Load("../../policies/lab")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type world struct {
	t *testing.T
	p *policy.Policy
	o *Observed
}

func newWorld(t *testing.T, sevenB bool) *world {
	w := &world{t: t, p: labPolicy(t), o: &Observed{Now: t0, LockSizes: map[string]int64{}}}
	w.o.State = verify.State{Services: map[string]string{"qwen2-5-7b": policy.ServiceDown}}
	for _, n := range w.p.ServiceNames() {
		s := w.p.Services[n]
		if s.Mode == policy.OnDemand && !sevenB {
			continue
		}
		w.pod(s.Namespace, n, "", corev1.PodRunning)
		w.workload(s.Namespace, n, s.Queue, s.Priority, s.Request, t0.Add(-2*time.Hour), true)
	}
	if sevenB {
		w.o.State.Services["qwen2-5-7b"] = policy.ServiceUp
	}
	return w
}

func (w *world) pod(ns, name, wf string, phase corev1.PodPhase) *corev1.Pod {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}, Annotations: map[string]string{}}}
	pod.Status.Phase = phase
	if wf != "" {
		pod.Labels[contract.LabelArgoWorkflow] = wf
		pod.Labels[contract.LabelKueueQueue] = "gpu-general"
	}
	w.o.Pods = append(w.o.Pods, pod)
	return &w.o.Pods[len(w.o.Pods)-1]
}

func (w *world) rl(r policy.Request) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, k := range policy.Kinds {
		if v := r.Get(k); v > 0 {
			out[corev1.ResourceName(w.p.Resource(k))] = k.Quantity(v)
		}
	}
	return out
}

func (w *world) workload(ns, pod, cq, prio string, r policy.Request, at time.Time, admitted bool) {
	wl := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-" + pod + "-abcde", CreationTimestamp: metav1.NewTime(at),
		OwnerReferences: []metav1.OwnerReference{{Kind: "Pod", Name: pod}}}}
	v := w.p.Priorities[prio].Value
	wl.Spec.Priority = &v
	wl.Spec.PriorityClassRef = &kueue.PriorityClassRef{Name: prio}
	wl.Spec.QueueName = kueue.LocalQueueName(w.p.Queues[cq].LocalQueue)
	wl.Spec.PodSets = []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: w.rl(r)}}}}}}}
	if admitted {
		wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
		wl.Status.Admission = &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(cq), PodSetAssignments: []kueue.PodSetAssignment{{
			Name: "main", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"nvidia.com/gpu": "rtx-5060-ti"}, ResourceUsage: w.rl(r)}}}
	} else {
		wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending",
			Message: "couldn't assign flavors to pod set main: insufficient unused quota"}}
	}
	w.o.Workloads = append(w.o.Workloads, wl)
}

// job adds a batch job of the cache-free template: "running" (started at
// start), "kueue" (its pod held), "lock" (waiting for main), "node".
func (w *world) job(name, prio, state string, created, start time.Time) {
	wf := wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Namespace: "experiments", Name: name, CreationTimestamp: metav1.NewTime(created)}}
	wf.Spec.WorkflowTemplateRef = &wfv1.WorkflowTemplateRef{Name: "gpu-step-no-cache"}
	wf.Spec.Arguments.Parameters = []wfv1.Parameter{{Name: contract.ParamPriority, Value: wfv1.AnyStringPtr(prio)}}
	wf.Status.Phase = wfv1.WorkflowRunning
	sem := &wfv1.SemaphoreStatus{}
	wf.Status.Synchronization = &wfv1.SynchronizationStatus{Semaphore: sem}
	req := w.p.Templates["gpu-step"].Request
	if state == "lock" {
		sem.Waiting = []wfv1.SemaphoreHolding{{Semaphore: semKey + "main", Holders: []string{"experiments/x"}}}
		w.o.Workflows = append(w.o.Workflows, wf)
		return
	}
	sem.Holding = []wfv1.SemaphoreHolding{{Semaphore: semKey + "main", Holders: []string{"experiments/" + name}}}
	w.o.Workflows = append(w.o.Workflows, wf)
	switch state {
	case "running":
		pod := w.pod("experiments", name, name, corev1.PodRunning)
		st := metav1.NewTime(start)
		pod.Status.StartTime = &st
		d := int64(3600)
		pod.Spec.ActiveDeadlineSeconds = &d
		w.workload("experiments", name, "gpu-general", prio, req, start, true)
	case "kueue":
		pod := w.pod("experiments", name, name, corev1.PodPending)
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: kueueGate}}
		w.workload("experiments", name, "gpu-general", prio, req, created, false)
	case "node":
		pod := w.pod("experiments", name, name, corev1.PodPending)
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}}
		w.workload("experiments", name, "gpu-general", prio, req, created, true)
	}
}

func (w *world) analyze(predicted int) *Report {
	in := Input{Policy: w.p, Environment: "lab"}
	if predicted >= 0 {
		in.Predict = func(tmpl, prio string, st verify.State) (verify.Prediction, error) {
			return verify.Prediction{Template: tmpl, Priority: prio, Admitted: predicted, BoundBy: "quota"}, nil
		}
	}
	return Analyze(in, w.o)
}

func only(t *testing.T, r *Report, wf string) Verdict {
	t.Helper()
	for _, v := range r.Waiting {
		if v.Workflow == wf {
			return v
		}
	}
	t.Fatalf("no verdict for %s in %+v", wf, r.Waiting)
	return Verdict{}
}

// lastActivity sets where the 7B's last request is read (the lab's policy
// does not say: the write-ups do not name the 7B's idle scaler).
func (w *world) lastActivity(la policy.LastActivity) {
	s := w.p.Services["qwen2-5-7b"]
	s.LastActivity = la
	w.p.Services["qwen2-5-7b"] = s
}

func (w *world) podNamed(name string) *corev1.Pod {
	for i := range w.o.Pods {
		if w.o.Pods[i].Name == name {
			return &w.o.Pods[i]
		}
	}
	w.t.Fatalf("no pod %s", name)
	return nil
}

func (w *world) service(r *Report, name string) ServiceStatus {
	for _, s := range r.Services {
		if s.Name == name {
			return s
		}
	}
	w.t.Fatalf("no service %s in %+v", name, r.Services)
	return ServiceStatus{}
}

func TestSevenBStarvesBatch(t *testing.T) {
	w := newWorld(t, true)
	w.lastActivity(policy.LastActivity{On: policy.LastActivityOnPod, Annotation: "lab.internal/last-request", Format: policy.TimeRFC3339})
	last := t0.Add(-20 * time.Minute)
	w.podNamed("qwen2-5-7b").Annotations["lab.internal/last-request"] = last.Format(time.RFC3339)
	w.job("b1", "batch", "kueue", t0.Add(-time.Minute), time.Time{})
	r := w.analyze(0)
	v := only(t, r, "b1")
	if v.Where != InKueue || v.Reason != ReasonQuota || strings.Join(v.Quota.Binding, ",") != "gpupolicy.dev/gpu-memory" {
		t.Fatalf("verdict %+v quota %+v", v, v.Quota)
	}
	if v.Quota.Available["gpupolicy.dev/gpu-memory"] != "404Mi" || v.Quota.Holders[0].Service != "qwen2-5-7b" || !v.Quota.Holders[0].Borrowing {
		t.Errorf("quota %+v", v.Quota)
	}
	if v.Until.Kind != UntilScaleDown || !v.Until.At.Equal(last.Add(time.Hour)) || !v.Until.WhileRequestsArrive || v.Until.By != "qwen2-5-7b" || !v.Stuck {
		t.Errorf("until %+v stuck %v", v.Until, v.Stuck)
	}
	if !strings.Contains(v.Until.Words, "14:40:00 UTC") || !strings.Contains(v.Until.Words, "indefinitely while requests keep arriving") {
		t.Errorf("until words %q", v.Until.Words)
	}
	s := w.service(r, "qwen2-5-7b")
	if s.LastRequest == nil || !s.LastRequest.Equal(last) || s.LastRequestFrom != "annotation lab.internal/last-request (RFC 3339) on pod llm/qwen2-5-7b" {
		t.Errorf("service %+v", s)
	}
	if r.Predictions[0].Words != "gpu-step-no-cache at batch, qwen2-5-7b up: running 0 of a predicted 0 (quota), 1 waiting" {
		t.Errorf("prediction %q", r.Predictions[0].Words)
	}
}

// The lab's policy says nothing of where the 7B's last request is read:
// status reads no annotation of its own choosing, and says so.
func TestSevenBLastActivityNotInPolicy(t *testing.T) {
	w := newWorld(t, true)
	// An annotation status once read by convention: ignored now.
	w.podNamed("qwen2-5-7b").Annotations["gpupolicy.dev/last-request"] = t0.Add(-5 * time.Minute).Format(time.RFC3339)
	w.job("b1", "batch", "kueue", t0.Add(-time.Minute), time.Time{})
	r := w.analyze(-1)
	v := only(t, r, "b1")
	// Up since two hours ago: it could scale down now at the earliest.
	if v.Until.Kind != UntilScaleDown || !v.Until.At.Equal(t0) || !strings.Contains(v.Until.Words, "last activity unknown: the policy does not say where to read it") {
		t.Errorf("until %+v", v.Until)
	}
	if s := w.service(r, "qwen2-5-7b"); s.LastRequest != nil || s.LastRequestFrom != "last activity unknown: the policy does not say where to read it" {
		t.Errorf("service %+v", s)
	}
}

// The policy names an annotation the pod lacks: unknown, and where it
// looked.
func TestSevenBLastActivityAbsent(t *testing.T) {
	w := newWorld(t, true)
	w.lastActivity(policy.LastActivity{On: policy.LastActivityOnPod, Annotation: "lab.internal/last-request", Format: policy.TimeRFC3339})
	w.podNamed("qwen2-5-7b").Annotations["lab.internal/last-request"] = "yesterday"
	w.job("b1", "batch", "kueue", t0.Add(-time.Minute), time.Time{})
	r := w.analyze(-1)
	v := only(t, r, "b1")
	if !strings.Contains(v.Until.Words, "last activity unknown: pod llm/qwen2-5-7b: unreadable") {
		t.Errorf("until %+v", v.Until)
	}
	if s := w.service(r, "qwen2-5-7b"); s.LastRequest != nil || s.LastRequestFrom != "last activity unknown: pod llm/qwen2-5-7b: unreadable" {
		t.Errorf("service %+v", s)
	}
	if len(r.Notes) == 0 || !strings.Contains(strings.Join(r.Notes, "\n"), `annotation lab.internal/last-request (RFC 3339) on pod llm/qwen2-5-7b: "yesterday" is not an RFC 3339 time`) {
		t.Errorf("notes %q", r.Notes)
	}
	// No value at all: where it looked.
	delete(w.podNamed("qwen2-5-7b").Annotations, "lab.internal/last-request")
	r = w.analyze(-1)
	if s := w.service(r, "qwen2-5-7b"); s.LastRequestFrom != "last activity unknown: no annotation lab.internal/last-request (RFC 3339) on pod llm/qwen2-5-7b" {
		t.Errorf("service %+v", s)
	}
}

// The 7B as a Deployment whose idle scaler stamps a label in Unix seconds:
// read through the pod's ReplicaSet.
func TestSevenBLastActivityOnDeployment(t *testing.T) {
	w := newWorld(t, true)
	w.lastActivity(policy.LastActivity{On: policy.LastActivityOnDeployment, Label: "lab.internal/last-request", Format: policy.TimeUnix})
	last := t0.Add(-10 * time.Minute)
	yes := true
	pod := w.podNamed("qwen2-5-7b")
	pod.Annotations["lab.internal/last-request"] = t0.Format(time.RFC3339) // on the pod: not where the policy says
	pod.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "qwen2-5-7b-6d5f", Controller: &yes}}
	rs := appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "qwen2-5-7b-6d5f",
		OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "qwen2-5-7b", Controller: &yes}}}}
	d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "qwen2-5-7b",
		Labels: map[string]string{"lab.internal/last-request": fmt.Sprint(last.Unix())}}}
	w.o.ReplicaSets, w.o.Deployments = []appsv1.ReplicaSet{rs}, []appsv1.Deployment{d}
	w.job("b1", "batch", "kueue", t0.Add(-time.Minute), time.Time{})
	r := w.analyze(-1)
	s := w.service(r, "qwen2-5-7b")
	if s.LastRequest == nil || !s.LastRequest.Equal(last) || s.LastRequestFrom != "label lab.internal/last-request (Unix seconds) on Deployment llm/qwen2-5-7b" {
		t.Fatalf("service %+v", s)
	}
	if v := only(t, r, "b1"); !v.Until.At.Equal(last.Add(time.Hour)) {
		t.Errorf("until %+v", v.Until)
	}
}

func TestLockHeldByHeldJobs(t *testing.T) {
	w := newWorld(t, true)
	for _, n := range []string{"h1", "h2", "h3", "h4"} {
		w.job(n, "batch", "kueue", t0.Add(-5*time.Minute), time.Time{})
	}
	w.job("train", "training", "lock", t0.Add(-time.Minute), time.Time{})
	r := w.analyze(-1)
	v := only(t, r, "train")
	if v.Reason != ReasonLockCapacity || v.Lock.HeldByKueue != 4 || v.Lock.KueueWould != "preempt" || !v.Stuck {
		t.Fatalf("verdict %+v lock %+v", v, v.Lock)
	}
	if v.Until.Kind != UntilScaleDown {
		t.Errorf("until %+v", v.Until)
	}
	if r.Stuck != 5 {
		t.Errorf("stuck = %d, want 5", r.Stuck)
	}
}

// Four batch jobs run on the quota (shares and host memory bind at four,
// explain's prediction with the 7B down); a fifth that Kueue holds is
// simply next in line: it starts when the first of them ends.
func TestNextInLineInKueue(t *testing.T) {
	w := newWorld(t, false)
	for i, n := range []string{"r1", "r2", "r3", "r4"} {
		w.job(n, "batch", "running", t0.Add(-30*time.Minute), t0.Add(time.Duration(-20+i)*time.Minute))
	}
	w.job("q5", "batch", "kueue", t0.Add(-2*time.Minute), time.Time{})
	w.job("q6", "batch", "kueue", t0.Add(-time.Minute), time.Time{})
	r := w.analyze(4)
	v := only(t, r, "q5")
	if v.Where != InKueue || v.Reason != ReasonNextInLine || strings.Join(v.Quota.Binding, ",") != "nvidia.com/gpu,memory" || v.Stuck {
		t.Fatalf("verdict %+v quota %+v", v, v.Quota)
	}
	if v.Until.Kind != UntilTimeLimit || !v.Until.At.Equal(t0.Add(40*time.Minute)) || v.Until.By != "Workflow r1" || !strings.Contains(v.Until.Words, "Workflow r1 reaches its 3,600 s time limit") {
		t.Errorf("until %+v", v.Until)
	}
	if !strings.HasPrefix(v.Summary, "next in line in Kueue: gpu-general is short of nvidia.com/gpu (asks 1 share, 0 shares left), memory (asks 2,048 MiB, 0 MiB left), used within its nominal quota by running jobs of its own queue; it starts when Workflow r1 ends") {
		t.Errorf("summary %q", v.Summary)
	}
	if ev := strings.Join(v.Evidence, "\n"); !strings.Contains(ev, "running jobs of gpu-general hold nvidia.com/gpu, memory within its nominal quota; it is admitted when Workflow r1 (time limit at 14:40:00 UTC) ends") {
		t.Errorf("evidence %s", ev)
	}
	// The second waits for the second end: the first freed slot is q5's.
	v6 := only(t, r, "q6")
	if v6.Reason != ReasonNextInLine || v6.Quota.Ahead != 1 || !v6.Until.At.Equal(t0.Add(41*time.Minute)) || v6.Until.By != "Workflow r2" {
		t.Errorf("q6 %+v until %+v", v6, v6.Until)
	}
	if !strings.HasSuffix(v6.Summary, "it starts when Workflow r2 ends, after the 1 Workload(s) ahead of it in Kueue's order") ||
		!strings.Contains(v6.Until.Words, "after the 1 Workload(s) ahead of it take the room freed before") {
		t.Errorf("q6 summary %q until %q", v6.Summary, v6.Until.Words)
	}
	if !r.Predictions[0].Agrees || r.Predictions[0].Running != 4 || r.IsStuck() {
		t.Errorf("predictions %+v", r.Predictions)
	}
}

// Next in line, but the running job's time limit passed minutes ago and
// Kueue still holds the job: stuck beyond the prediction.
func TestNextInLineOverdue(t *testing.T) {
	w := newWorld(t, false)
	for i, n := range []string{"r1", "r2", "r3", "r4"} {
		w.job(n, "batch", "running", t0.Add(-90*time.Minute), t0.Add(time.Duration(-65+i)*time.Minute))
	}
	w.job("q5", "batch", "kueue", t0.Add(-2*time.Minute), time.Time{})
	r := w.analyze(4)
	v := only(t, r, "q5")
	if v.Reason != ReasonNextInLine || !v.Stuck || !r.IsStuck() || !strings.HasPrefix(v.Summary, "waits longer than the policy predicts: Workflow r1 should have freed gpu-general at 13:55:00 UTC (5m0s ago)") {
		t.Errorf("verdict %+v", v)
	}
}

// The quota full with Workloads that have no time limit (pods submitted to
// the queue outside Argo): Kueue holds the job on the binding resources,
// and nothing bounds the wait.
func TestQuotaFullWithoutEnd(t *testing.T) {
	w := newWorld(t, false)
	req := w.p.Templates["gpu-step"].Request
	for _, n := range []string{"nb1", "nb2", "nb3", "nb4"} {
		w.pod("experiments", n, "", corev1.PodRunning)
		w.workload("experiments", n, "gpu-general", "batch", req, t0.Add(-time.Hour), true)
	}
	w.job("q5", "batch", "kueue", t0.Add(-time.Minute), time.Time{})
	r := w.analyze(4)
	v := only(t, r, "q5")
	if v.Reason != ReasonQuota || strings.Join(v.Quota.Binding, ",") != "nvidia.com/gpu,memory" || !v.Stuck || v.Until.Kind != UntilNever {
		t.Fatalf("verdict %+v quota %+v", v, v.Quota)
	}
	var names []string
	for _, h := range v.Quota.Holders {
		names = append(names, h.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "Workload experiments/pod-nb1-abcde") || !strings.Contains(got, "embed") {
		t.Errorf("holders %s", got)
	}
}

func TestNextInLine(t *testing.T) {
	w := newWorld(t, false)
	for i, n := range []string{"r1", "r2", "r3", "r4"} {
		w.job(n, "batch", "running", t0.Add(-30*time.Minute), t0.Add(time.Duration(-20+i)*time.Minute))
	}
	w.job("n5", "batch", "lock", t0.Add(-2*time.Minute), time.Time{})
	w.job("n6", "batch", "lock", t0.Add(-time.Minute), time.Time{})
	r := w.analyze(4)
	v := only(t, r, "n5")
	if v.Reason != ReasonNextInLine || v.Lock.Position != 1 || v.Stuck || v.Until.Kind != UntilTimeLimit || !v.Until.At.Equal(t0.Add(40*time.Minute)) {
		t.Fatalf("verdict %+v lock %+v", v, v.Lock)
	}
	if v6 := only(t, r, "n6"); v6.Lock.Position != 2 {
		t.Errorf("n6 position %d", v6.Lock.Position)
	}
	if r.IsStuck() {
		t.Error("next in line is not stuck")
	}
}

func TestPendingOnNode(t *testing.T) {
	w := newWorld(t, false)
	out := w.pod("default", "outside", "", corev1.PodRunning)
	out.Spec.NodeName = "gpu-node-0"
	out.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}}}}
	w.job("p1", "batch", "node", t0.Add(-time.Minute), time.Time{})
	v := only(t, w.analyze(-1), "p1")
	if v.Where != OnNode || v.Reason != ReasonUnschedulable || !v.Stuck || v.Until.Kind != UntilNever {
		t.Fatalf("verdict %+v", v)
	}
	if len(v.Node.Outside) != 1 || !strings.Contains(v.Node.Outside[0], "default/outside") {
		t.Errorf("outside %v", v.Node.Outside)
	}
}

// Fewer run than predicted while jobs wait: stuck beyond the prediction.
func TestFewerThanPredicted(t *testing.T) {
	w := newWorld(t, false)
	w.job("r1", "batch", "running", t0.Add(-30*time.Minute), t0.Add(-20*time.Minute))
	w.job("n2", "batch", "lock", t0.Add(-time.Minute), time.Time{})
	r := w.analyze(4)
	if c := r.Predictions[0]; c.Agrees || c.Running != 1 || c.Predicted != 4 || !strings.Contains(c.Words, "running 1 of a predicted 4") {
		t.Errorf("prediction %+v", c)
	}
	if !r.IsStuck() {
		t.Error("want stuck")
	}
}
