package crosscheck_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/drift/live"
	"github.com/gpupolicy/gpupolicy/internal/admission"
	. "github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// fifoLab is the lab with gpu-large in gpu-general, a job of 5 shares that
// never fits while the four always-on models hold 4 of the 8, and
// gpu-general's queueing strategy set.
func fifoLab(strategy string) *policy.Policy {
	p := Lab().Template(MakeTemplate("gpu-large").Queue("gpu-general").Card("rtx-5060-ti").Request(5, GiB(2), 1024)).Obj()
	q := p.Queues["gpu-general"]
	q.QueueingStrategy = strategy
	p.Queues["gpu-general"] = q
	return p
}

// serviceHeadLab is the lab with a StrictFIFO gpu-large-model that also
// runs llm-step jobs, and a second on-demand service, whisper (8,000 MiB,
// in gpu-general): while whisper is up the 7B cannot come up and waits at
// the head of gpu-large-model, before the llm-step jobs.
func serviceHeadLab(strategy string) *policy.Policy {
	p := Lab().
		Service(MakeService("whisper").OnDemand(600).Queue("gpu-general").Card("rtx-5060-ti").Priority("always-on").Request(1, GiB(1), 8000)).
		Template(MakeTemplate("llm-step").Namespace("llm").Queue("gpu-large-model").Card("rtx-5060-ti").Priority("on-demand-llm").Request(1, GiB(1), 256)).
		Obj()
	q := p.Queues["gpu-large-model"]
	q.QueueingStrategy = strategy
	p.Queues["gpu-large-model"] = q
	return p
}

// TestCrossCheckStrictFIFO runs every block explain finds in two StrictFIFO
// labs on the real Kueue, state by state: the services of the state up,
// the head (the head's template filled until its next job is not
// admitted, or the service coming up that does not fit), then the
// workloads the model says it holds off. With StrictFIFO none of them may
// be admitted while the head waits; with BestEffortFIFO (the same policy
// otherwise, for which explain finds no block) each one must be. The
// ClusterQueues are applied as render ships them, strategy included.
func TestCrossCheckStrictFIFO(t *testing.T) {
	for name, tc := range map[string]struct {
		policy func(string) *policy.Policy
		queue  string
	}{
		"gpu-large in gpu-general":  {fifoLab, "gpu-general"},
		"the 7B in gpu-large-model": {serviceHeadLab, "gpu-large-model"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := admission.Explain(tc.policy(policy.StrictFIFO))
			if err != nil {
				t.Fatal(err)
			}
			var blocks []admission.Block
			for _, q := range r.Queueing {
				if q.Queue == tc.queue {
					blocks = q.Blocks
				}
			}
			if len(blocks) == 0 {
				t.Fatalf("the model finds no StrictFIFO block in %s: nothing to cross-check", tc.queue)
			}
			for _, strategy := range []string{policy.StrictFIFO, policy.BestEffortFIFO} {
				t.Run(strategy, func(t *testing.T) {
					p := tc.policy(strategy)
					if be, _ := admission.Explain(p); strategy == policy.BestEffortFIFO {
						for _, q := range be.Queueing {
							if len(q.Blocks) != 0 {
								t.Fatalf("the model finds blocks in %s under BestEffortFIFO", q.Queue)
							}
						}
					}
					cq := shipped(t, p, "ClusterQueue", tc.queue)
					if got, _, _ := unstructured.NestedString(cq.Object, "spec", "queueingStrategy"); got != strategy {
						t.Fatalf("render ships %s with queueingStrategy %q, want %q", tc.queue, got, strategy)
					}
					x := newChecker(t, labCluster(t), p)
					for _, b := range blocks {
						for _, w := range b.When {
							label := fmt.Sprintf("%s%s at %s, %s, %s", b.Head.Template, b.Head.Service, b.Head.Priority, b.How, policy.StateLabel(w.State))
							t.Run(label, func(t *testing.T) { x.checkBlock(t, b, w, strategy == policy.StrictFIFO) })
						}
					}
				})
			}
		})
	}
}

// TestCrossCheckStrictFIFONotHeldOff checks the model's other answer: a
// StrictFIFO head whose reservation the cycle takes after the 7B's (a
// batch gpu-large job: lower priority than the 7B's on-demand-llm, both
// borrowing) does not hold the 7B off, and Kueue admits it.
func TestCrossCheckStrictFIFONotHeldOff(t *testing.T) {
	p := fifoLab(policy.StrictFIFO)
	r, err := admission.Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	down := map[string]string{"qwen2-5-7b": policy.ServiceDown}
	var free []string
	for _, pr := range []string{"training", "on-demand-llm", "batch"} {
		held := false
		for _, q := range r.Queueing {
			for _, b := range q.Blocks {
				if b.How == admission.HowReservedQuota && b.Head.Template == "gpu-large" && b.Head.Priority == pr {
					held = true
				}
			}
		}
		if !held {
			free = append(free, pr)
		}
	}
	if len(free) != 1 || free[0] != "batch" {
		t.Fatalf("the model holds the 7B off behind gpu-large heads at every priority but %v; want all but batch", free)
	}
	x := newChecker(t, labCluster(t), p)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	x.reset(ctx, t)
	x.servicesUp(ctx, t, down)
	tp := p.Templates["gpu-large"]
	x.job(ctx, t, tp.Namespace, "head-0", p.Queues[tp.Queue].LocalQueue, "batch", tp.Card, tp.Request)
	time.Sleep(1500 * time.Millisecond)
	x.startService(ctx, t, "qwen2-5-7b")
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		return x.workloads(ctx, t)["svc-qwen2-5-7b"].admitted, nil
	})
	if err != nil {
		t.Errorf("Kueue did not admit the 7B behind a batch gpu-large head; the model says the cycle takes the 7B first")
	}
	if x.workloads(ctx, t)["head-0"].admitted {
		t.Error("Kueue admitted the gpu-large head; the model says it does not fit")
	}
}

// checkBlock runs one block in one state.
func (x *checker) checkBlock(t *testing.T, b admission.Block, w admission.BlockState, strict bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	x.reset(ctx, t)
	x.servicesUp(ctx, t, w.State)
	var head string
	if b.Head.Service != "" {
		x.startService(ctx, t, b.Head.Service)
		head = "svc-" + b.Head.Service
	} else {
		tp := x.p.Templates[b.Head.Template]
		lq := x.p.Queues[tp.Queue].LocalQueue
		for i := int64(0); i <= w.Ahead; i++ {
			x.job(ctx, t, tp.Namespace, fmt.Sprintf("head-%d", i), lq, b.Head.Priority, tp.Card, tp.Request)
		}
		x.waitAdmitted(ctx, t, "head-", w.Ahead)
		head = fmt.Sprintf("head-%d", w.Ahead)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, ok := x.workloads(ctx, t)[head]
		return ok, nil
	})
	if err != nil {
		t.Fatalf("the head's Workload never appeared")
	}
	// Kueue orders equal priorities by creation (seconds): the waiters
	// come a second later, behind the head.
	time.Sleep(1500 * time.Millisecond)
	// submit creates one waiter: a template's job or a service's.
	submit := func(wt admission.Waiter) (ns, name string) {
		if wt.Service != "" {
			x.startService(ctx, t, wt.Service)
			return x.p.Services[wt.Service].Namespace, "svc-" + wt.Service
		}
		wp := x.p.Templates[wt.Template]
		name = fmt.Sprintf("wait-%s-%s", wt.Template, wt.Priority)
		x.job(ctx, t, wp.Namespace, name, x.p.Queues[wp.Queue].LocalQueue, wt.Priority, wp.Card, wp.Request)
		return wp.Namespace, name
	}
	if strict {
		// The head waits; so must everything the model says it holds off.
		var waiters []string
		for _, wt := range w.Waits {
			_, name := submit(wt)
			waiters = append(waiters, name)
		}
		time.Sleep(12 * time.Second)
		wls := x.workloads(ctx, t)
		for _, n := range waiters {
			if wls[n].admitted {
				t.Errorf("StrictFIFO: Kueue admitted %s behind the head %s; the model says it waits", n, head)
			}
		}
		if wls[head].admitted {
			t.Errorf("Kueue admitted the head %s; the model says it does not fit", head)
		}
	} else {
		// Each one, alone behind the head, is admitted.
		for _, wt := range w.Waits {
			ns, name := submit(wt)
			err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
				return x.workloads(ctx, t)[name].admitted, nil
			})
			if err != nil {
				t.Errorf("BestEffortFIFO: Kueue did not admit %s behind the head %s; the model says it is admitted", name, head)
			}
			x.deleteJob(ctx, t, ns, name)
		}
		if x.workloads(ctx, t)[head].admitted {
			t.Errorf("Kueue admitted the head %s; the model says it does not fit", head)
		}
	}
	for n, st := range x.workloads(ctx, t) {
		if st.preempted != "" {
			t.Errorf("Kueue preempted %s (%s); the model evicts nothing here", n, st.preempted)
		}
	}
	t.Logf("Kueue and the model agree: %s waits at the head, %d held off (StrictFIFO %v)", head, len(w.Waits), strict)
}

// deleteJob deletes one cross-check Job and waits for its Workload to go.
func (x *checker) deleteJob(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	bg := metav1.DeletePropagationBackground
	if err := x.c.Clientset().BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg, GracePeriodSeconds: ptr[int64](0)}); err != nil {
		t.Fatalf("deleting job %s/%s: %v", ns, name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, ok := x.workloads(ctx, t)[name]
		return !ok, nil
	})
	if err != nil {
		t.Fatalf("the Workload of %s/%s is still there", ns, name)
	}
}

// TestCrossCheckLimitOnly: a Job whose container states its GPU memory by
// limit only (4,096 MiB), in a job namespace with the LimitRange render
// ships (default request 1,024 MiB). Kueue v0.17 counts it at the default
// request — admitted (status.admission) and pending (the requests it
// records) alike — as admission.CountPodSets predicts, while the pod the
// Job makes asks 4,096 MiB of the node (the API server defaults a Pod's
// request to its limit). drift --live's Workloads check reads it so.
func TestCrossCheckLimitOnly(t *testing.T) {
	p := labValid()
	c := labCluster(t)
	x := newChecker(t, c, p)
	decl := corev1.ResourceName(p.DeclarationResource)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	lr := applyLimitRange(ctx, t, c, p, "experiments")

	tp := p.Templates["gpu-step"]
	rl := x.requests(policy.Request{Shares: tp.Request.Shares, HostMemoryMiB: tp.Request.HostMemoryMiB}).Requests
	limits := rl.DeepCopy()
	limits[decl] = resource.MustParse("4Gi")
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: contract.MainContainer, Image: "lab.local/crosscheck:latest",
		Resources: corev1.ResourceRequirements{Requests: rl, Limits: limits}}}}
	want := admission.CountPodSets([]kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: spec}}}, decl,
		admission.ContainerDefaults([]corev1.LimitRange{*lr})).Counted
	if want.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Fatalf("the model counts %s, want the 1Gi default request", want.String())
	}

	for _, tc := range []struct {
		name  string
		state map[string]string
	}{
		{"admitted, 7B down", map[string]string{"qwen2-5-7b": policy.ServiceDown}},
		{"pending, 7B up", map[string]string{"qwen2-5-7b": policy.ServiceUp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x.reset(ctx, t)
			x.servicesUp(ctx, t, tc.state)
			job := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "limit-only", Namespace: tp.Namespace, Labels: map[string]string{
					contract.LabelKueueQueue: p.Queues[tp.Queue].LocalQueue, contract.LabelKueuePriority: "batch", labelCrossCheck: "true"}},
				Spec: batchv1.JobSpec{BackoffLimit: ptr[int32](0), Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelCrossCheck: "true"},
						Annotations: map[string]string{cluster.AnnotationRunSeconds: "1h"}},
					Spec: *spec.DeepCopy(),
				}},
			}
			job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
			job.Spec.Template.Spec.NodeSelector = p.Cards[tp.Card].NodeLabels
			if _, err := c.Clientset().BatchV1().Jobs(tp.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			pending := tc.state["qwen2-5-7b"] == policy.ServiceUp
			// Kueue's own count: the admission's usage, or the requests
			// it records on a Workload it could not admit.
			var counted resource.Quantity
			err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				wl, ok := x.workloadOf(ctx, t, tp.Namespace, "limit-only")
				if !ok {
					return false, nil
				}
				path := []string{"status", "admission", "podSetAssignments"}
				key := "resourceUsage"
				if pending {
					path, key = []string{"status", "resourceRequests"}, "resources"
				}
				items, _, _ := unstructured.NestedSlice(wl.Object, path...)
				for _, it := range items {
					if q, ok, _ := unstructured.NestedString(it.(map[string]any), key, string(decl)); ok {
						counted = resource.MustParse(q)
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				t.Fatalf("Kueue recorded no %s for the limit-only Workload (pending %v)", decl, pending)
			}
			if counted.Cmp(want) != 0 {
				t.Errorf("Kueue counted %s of %s; the model %s", counted.String(), decl, want.String())
			}
			if !pending {
				// The pod asks the limit of the node.
				err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
					pods, err := c.Clientset().CoreV1().Pods(tp.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=limit-only"})
					if err != nil || len(pods.Items) == 0 {
						return false, nil
					}
					q := pods.Items[0].Spec.Containers[0].Resources.Requests[decl]
					if q.Cmp(resource.MustParse("4Gi")) != 0 {
						t.Errorf("the Job's pod requests %s of %s; the API server defaults it to the 4Gi limit", q.String(), decl)
					}
					return true, nil
				})
				if err != nil {
					t.Errorf("the limit-only Job made no pod")
				}
			}
			counts, err := live.Workloads(ctx, c.Dynamic(), p.DeclarationResource, p.DefaultGPUMemoryMiB)
			if err != nil {
				t.Fatal(err)
			}
			var got *live.WorkloadCount
			for i := range counts {
				if counts[i].Owner == "Job/limit-only" {
					got = &counts[i]
				}
			}
			verb := "was counted"
			if pending {
				verb = "is counted"
			}
			switch {
			case got == nil:
				t.Fatalf("drift --live's Workloads check does not list the limit-only Job: %+v", counts)
			case !got.LimitOnly || !got.AtDefault || got.CountedMiB != 1024 || got.DeclaredMiB != 4096 || got.Admitted == pending:
				t.Errorf("drift --live reads %+v", *got)
			case !strings.HasPrefix(got.Message, "Job/limit-only declares 4,096 MiB by limit only: it "+verb+" as 1,024 MiB, the LimitRange default"):
				t.Errorf("message %q", got.Message)
			}
		})
	}
}

// workloadOf is the Workload Kueue made for a Job.
func (x *checker) workloadOf(ctx context.Context, t *testing.T, ns, job string) (*unstructured.Unstructured, bool) {
	list, err := x.c.Dynamic().Resource(contract.GVRWorkload).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing workloads: %v", err)
		return nil, false
	}
	for i := range list.Items {
		for _, ref := range list.Items[i].GetOwnerReferences() {
			if ref.Kind == "Job" && ref.Name == job {
				return &list.Items[i], true
			}
		}
	}
	return nil, false
}

// applyLimitRange applies the LimitRange render ships for a job namespace
// and removes it after the test when it was not there before.
func applyLimitRange(ctx context.Context, t *testing.T, c *cluster.Cluster, p *policy.Policy, ns string) *corev1.LimitRange {
	t.Helper()
	res, err := render.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc []byte
	for _, o := range res.Objects {
		if o.Kind == "LimitRange" && o.Namespace == ns {
			doc = res.Files[o.File]
		}
	}
	if doc == nil {
		t.Fatalf("render of %s has no LimitRange in %s", p.Name, ns)
	}
	_, err = c.Clientset().CoreV1().LimitRanges(ns).Get(ctx, contract.LimitRangeName, metav1.GetOptions{})
	existed := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, doc); err != nil {
		t.Fatalf("applying the LimitRange: %v", err)
	}
	if !existed {
		t.Cleanup(func() {
			_ = c.Clientset().CoreV1().LimitRanges(ns).Delete(context.Background(), contract.LimitRangeName, metav1.DeleteOptions{})
		})
	}
	lr, err := c.Clientset().CoreV1().LimitRanges(ns).Get(ctx, contract.LimitRangeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return lr
}
