// Package crosscheck_test checks the admission model against the real
// Kueue v0.17 controller in the lab cluster (package cluster): for a few
// policies, state by state, it applies the ResourceFlavors, Cohorts,
// ClusterQueues, LocalQueues and WorkloadPriorityClasses exactly as render
// ships them (the rendered YAML of render.Render, never a copy), brings the
// services of the state up as long-running Jobs, submits jobs of a
// template at a priority, and
// compares how many Kueue admits, and whom it evicts, with
// admission.Explain's prediction. It also checks the dead paths: a waking
// service that the model says waits does wait, and evicts nothing.
//
// It skips when the lab cluster's binaries are not built (`make
// cluster-build`) or with -short. A full run takes several minutes:
//
//	go test ./test/crosscheck -run CrossCheck -v -timeout 30m
package crosscheck_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	. "github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
)

func TestMain(m *testing.M) { os.Exit(clustertest.Main(m)) }

func labCluster(t *testing.T) *cluster.Cluster { return clustertest.Shared(t) }

const labelCrossCheck = "gpupolicy.dev/crosscheck"

// labValid is the lab. Its gpu-large-model sets reclaimWithinCohort, without
// which Kueue rejects borrowWithinCohort (TestCrossCheckBorrowWithoutReclaimIsRejected);
// the 7B → batch eviction is dead all the same (kubernetes-sigs/kueue#10171).
func labValid() *policy.Policy { return Lab().Obj() }

// labCard puts a policy's single card on the lab node's labels.
func labCard(w *PolicyWrapper, name string, memoryMiB, shares int64) *PolicyWrapper {
	return w.Card(name, memoryMiB, shares).CardModel(name, "NVIDIA GeForce RTX 5060 Ti", "NVIDIA-GeForce-RTX-5060-Ti-SHARED")
}

// sharedCohort: an owner queue holds the card; b1 runs jobs on borrowed
// quota; b2's on-demand service borrows and may evict low jobs in b1
// (borrowWithinCohort fires).
func sharedCohort() *policy.Policy {
	return labCard(MakePolicy("shared"), "rtx-5060-ti", 16311, 8).
		Priority("high", 100).DefaultPriority("mid", 50).Priority("low", 10).
		Queue(MakeQueue("owner").Cohort("co").Namespaces("owner").
			Flavor(MakeFlavor("rtx-5060-ti").Shares(4).HostMemory(GiB(16)).GPUMemory(16311)).
			Preemption("LowerPriority", "LowerPriority")).
		Queue(MakeQueue("b1").Cohort("co").Namespaces("experiments").
			Flavor(MakeFlavor("rtx-5060-ti").BorrowingLimit(policy.Shares, 4).
				BorrowingLimit(policy.HostMemory, GiB(16)).BorrowingLimit(policy.GPUMemory, 16311))).
		Queue(MakeQueue("b2").Cohort("co").Namespaces("llm").
			Flavor(MakeFlavor("rtx-5060-ti").BorrowingLimit(policy.Shares, 1).
				BorrowingLimit(policy.HostMemory, GiB(4)).BorrowingLimit(policy.GPUMemory, 8192)).
			Preemption("Never", "LowerPriority").BorrowWithinCohort("LowerPriority", "low")).
		Service(MakeService("llm").OnDemand(3600).Namespace("llm").Queue("b2").Card("rtx-5060-ti").
			Priority("mid").Request(1, GiB(4), 8192)).
		Template(MakeTemplate("step").Queue("b1").Card("rtx-5060-ti").Request(1, GiB(2), 1024)).Obj()
}

// lending: a cohort of three with a lending limit.
func lending() *policy.Policy {
	return labCard(MakePolicy("lending"), "rtx-5060-ti", 16311, 8).
		Priority("high", 100).DefaultPriority("low", 10).
		Queue(MakeQueue("a").Cohort("co").Namespaces("team-a").
			Flavor(MakeFlavor("rtx-5060-ti").Shares(6).HostMemory(GiB(24)).GPUMemory(12000).
				LendingLimit(policy.Shares, 2).LendingLimit(policy.HostMemory, GiB(8)).LendingLimit(policy.GPUMemory, 4000))).
		Queue(MakeQueue("b").Cohort("co").Namespaces("team-b").
			Flavor(MakeFlavor("rtx-5060-ti").Shares(2).HostMemory(GiB(8)).GPUMemory(4311))).
		Queue(MakeQueue("z").Cohort("co").Namespaces("llm").
			Flavor(MakeFlavor("rtx-5060-ti").BorrowingLimit(policy.Shares, 3).
				BorrowingLimit(policy.HostMemory, GiB(8)).BorrowingLimit(policy.GPUMemory, 8000))).
		Service(MakeService("llm").OnDemand(600).Namespace("llm").Queue("z").Card("rtx-5060-ti").
			Priority("high").Request(2, GiB(4), 6000)).
		Template(MakeTemplate("ta").Namespace("team-a").Queue("a").Card("rtx-5060-ti").Request(1, GiB(1), 1000)).
		Template(MakeTemplate("tb").Namespace("team-b").Queue("b").Card("rtx-5060-ti").Request(1, GiB(1), 1000)).Obj()
}

func TestCrossCheckCapacity(t *testing.T) {
	for name, p := range map[string]*policy.Policy{"lab": labValid(), "shared": sharedCohort(), "lending": lending()} {
		t.Run(name, func(t *testing.T) {
			c := labCluster(t)
			x := newChecker(t, c, p)
			r, err := admission.Explain(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range r.Capacity {
				if row.CacheFree || !row.Reachable {
					continue // same quota as the base template; locks are Argo's
				}
				label := fmt.Sprintf("%s at %s, %s", row.Template, row.Priority, policy.StateLabel(row.State))
				t.Run(label, func(t *testing.T) { x.checkRow(t, r, row) })
			}
		})
	}
}

// TestCrossCheckWake checks waking services against Decide: the lab's 7B
// waits behind four batch jobs and evicts none (dead borrowWithinCohort);
// the shared cohort's service evicts one low job in b1.
func TestCrossCheckWake(t *testing.T) {
	cases := map[string]struct {
		p                      *policy.Policy
		fillTemplate, fillPrio string
		service                string
	}{
		"lab: a waking 7B waits behind batch jobs":  {labValid(), "gpu-step", "batch", "qwen2-5-7b"},
		"shared: a waking service evicts a low job": {sharedCohort(), "step", "low", "llm"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := labCluster(t)
			x := newChecker(t, c, tc.p)
			// The model: always-on services, then the queue filled with
			// jobs, then the service wakes.
			s := admission.NewSnapshot(tc.p)
			for _, n := range tc.p.ServiceNames() {
				if tc.p.Services[n].Mode == policy.AlwaysOn {
					s.Add(serviceWorkload(s, tc.p, n))
				}
			}
			t0 := tc.p.Templates[tc.fillTemplate]
			pr := tc.p.Priorities[tc.fillPrio]
			fill := 0
			for {
				w := s.NewWorkload(admission.Workload{Name: "job", Queue: t0.Queue, Card: t0.Card, Priority: pr.Name, Value: pr.Value, Request: t0.Request})
				if !s.Fits(w) {
					break
				}
				s.Add(w)
				fill++
			}
			d := s.Decide(serviceWorkload(s, tc.p, tc.service))
			t.Logf("model: %d %s jobs admitted, then %s: %s, targets %d", fill, tc.fillPrio, tc.service, d.Outcome, len(d.Targets))

			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			x.reset(ctx, t)
			x.servicesUp(ctx, t, nil)
			x.submitJobs(ctx, t, t0, tc.fillPrio, fill+1)
			x.waitAdmitted(ctx, t, "job-", int64(fill))
			x.startService(ctx, t, tc.service)
			time.Sleep(10 * time.Second)
			wls := x.workloads(ctx, t)
			svc := wls["svc-"+tc.service]
			switch d.Outcome {
			case admission.Wait:
				if svc.admitted {
					t.Errorf("Kueue admitted %s; the model says it waits", tc.service)
				}
				for n, w := range wls {
					if w.preempted != "" {
						t.Errorf("Kueue preempted %s (%s); the model says nothing is evicted", n, w.preempted)
					}
				}
			case admission.Preempt:
				evicted := 0
				for n, w := range wls {
					if strings.HasPrefix(n, "job-") && w.preempted != "" {
						evicted++
						if w.preempted != d.Targets[0].Reason {
							t.Errorf("%s preempted with reason %s, model says %s", n, w.preempted, d.Targets[0].Reason)
						}
					}
				}
				if evicted != len(d.Targets) {
					t.Errorf("Kueue evicted %d jobs, the model %d", evicted, len(d.Targets))
				}
			default:
				t.Fatalf("unexpected model outcome %s", d.Outcome)
			}
		})
	}
}

// TestCrossCheckBorrowWithoutReclaimIsRejected: gpu-large-model with
// borrowWithinCohort and reclaimWithinCohort Never; the model reports
// preemption-rejected, and the API server must refuse the ClusterQueue.
func TestCrossCheckBorrowWithoutReclaimIsRejected(t *testing.T) {
	c := labCluster(t)
	p := Lab().Obj()
	q := p.Queues["gpu-large-model"]
	q.Preemption.ReclaimWithinCohort = "Never"
	p.Queues["gpu-large-model"] = q
	r, err := admission.Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range r.Findings {
		found = found || f.Rule == "preemption-rejected"
	}
	if !found {
		t.Fatal("the model does not report preemption-rejected on the lab")
	}
	// Render refuses it (crdcheck runs the CRD's CEL rules in-process) ...
	const rejected = "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"
	if _, err := render.Render(p); err == nil || !strings.Contains(err.Error(), rejected) {
		t.Errorf("render of gpu-large-model with reclaimWithinCohort Never: %v, want the CRD's %q", err, rejected)
	}
	// ... and so must the API server: the lab's gpu-large-model as render
	// ships it, with only reclaimWithinCohort set to Never.
	cq := shipped(t, Lab().Obj(), "ClusterQueue", "gpu-large-model")
	if err := unstructured.SetNestedField(cq.Object, "Never", "spec", "preemption", "reclaimWithinCohort"); err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.Marshal(cq.Object)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = c.Apply(ctx, doc)
	if err == nil {
		_ = c.Dynamic().Resource(contract.GVRClusterQueue).Delete(context.Background(), "gpu-large-model", metav1.DeleteOptions{})
		t.Fatal("the API server accepted gpu-large-model with borrowWithinCohort and reclaimWithinCohort Never")
	}
	if !strings.Contains(err.Error(), rejected) {
		t.Errorf("rejected for another reason: %v", err)
	}
}

// kueueKinds are the objects of a render the cross-check applies.
var kueueKinds = map[string]bool{"ResourceFlavor": true, "Cohort": true, "ClusterQueue": true, "LocalQueue": true, "WorkloadPriorityClass": true}

// rendered returns the rendered YAML of p's Kueue objects, as render ships
// them.
func rendered(t *testing.T, p *policy.Policy) []byte {
	t.Helper()
	res, err := render.Render(p)
	if err != nil {
		t.Fatalf("rendering %s: %v", p.Name, err)
	}
	var docs []string
	for _, o := range res.Objects {
		if kueueKinds[o.Kind] {
			docs = append(docs, string(res.Files[o.File]))
		}
	}
	return []byte(strings.Join(docs, "---\n"))
}

// shipped is one Kueue object of p as render ships it.
func shipped(t *testing.T, p *policy.Policy, kind, name string) *unstructured.Unstructured {
	t.Helper()
	objs, err := cluster.DecodeYAML(rendered(t, p))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("render of %s has no %s %s", p.Name, kind, name)
	return nil
}

func serviceWorkload(s *admission.Snapshot, p *policy.Policy, n string) *admission.Workload {
	sv := p.Services[n]
	return s.NewWorkload(admission.Workload{Name: n, Service: n, Queue: sv.Queue, Card: sv.Card,
		Priority: sv.Priority, Value: p.Priorities[sv.Priority].Value, Request: sv.Request})
}

// checker applies one policy's Kueue objects and runs scenarios on them.
type checker struct {
	c          *cluster.Cluster
	p          *policy.Policy
	namespaces []string
}

func newChecker(t *testing.T, c *cluster.Cluster, p *policy.Policy) *checker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	x := &checker{c: c, p: p, namespaces: p.Namespaces()}
	for _, ns := range x.namespaces {
		if err := c.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Apply(ctx, rendered(t, p)); err != nil {
		t.Fatalf("applying %s's Kueue objects: %v", p.Name, err)
	}
	// The GPU nodes made ready as reconcile makes them, so that admitted
	// pods also schedule, as on a real cluster.
	if err := clustertest.ReadyNodes(ctx, c, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.teardown(t) })
	for _, n := range p.QueueNames() {
		err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			cq, err := c.Dynamic().Resource(contract.GVRClusterQueue).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return clustertest.ConditionTrue(cq, "Active"), nil
		})
		if err != nil {
			t.Fatalf("ClusterQueue %s never became active: %v", n, err)
		}
	}
	return x
}

func (x *checker) teardown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	x.reset(ctx, t)
	dyn := x.c.Dynamic()
	for _, n := range x.p.QueueNames() {
		for _, ns := range x.p.Queues[n].Namespaces {
			_ = dyn.Resource(contract.GVRLocalQueue).Namespace(ns).Delete(ctx, x.p.Queues[n].LocalQueue, metav1.DeleteOptions{})
		}
		_ = dyn.Resource(contract.GVRClusterQueue).Delete(ctx, n, metav1.DeleteOptions{})
	}
	for _, n := range x.p.CardNames() {
		_ = dyn.Resource(contract.GVRResourceFlavor).Delete(ctx, n, metav1.DeleteOptions{})
	}
	for _, pr := range x.p.Ladder() {
		_ = dyn.Resource(contract.GVRWorkloadPriorityClass).Delete(ctx, pr.Name, metav1.DeleteOptions{})
	}
	// ClusterQueues keep a finalizer until their workloads are gone; wait
	// so the next policy can reuse the names.
	_ = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, n := range x.p.QueueNames() {
			if _, err := dyn.Resource(contract.GVRClusterQueue).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
}

func (x *checker) requests(r policy.Request) corev1.ResourceRequirements {
	rl := corev1.ResourceList{}
	for _, k := range policy.Kinds {
		if v := r.Get(k); v > 0 {
			rl[corev1.ResourceName(x.p.Resource(k))] = k.Quantity(v)
		}
	}
	return corev1.ResourceRequirements{Requests: rl, Limits: rl}
}

// job creates a Job standing for one workload: a pod asking the request,
// running until deleted (no run-seconds annotation), held by Kueue until
// admitted.
func (x *checker) job(ctx context.Context, t *testing.T, ns, name, localQueue, priority, card string, r policy.Request) {
	t.Helper()
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			contract.LabelKueueQueue:    localQueue,
			contract.LabelKueuePriority: priority,
			labelCrossCheck:             "true",
		}},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr[int32](0),
			Template: corev1.PodTemplateSpec{
				// Services and jobs hold their quota for the whole check: the
				// simulated node ends a Job's pod after 1 s unless told.
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelCrossCheck: "true"},
					Annotations: map[string]string{cluster.AnnotationRunSeconds: "1h"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					NodeSelector:  x.p.Cards[card].NodeLabels,
					Containers:    []corev1.Container{{Name: contract.MainContainer, Image: "lab.local/crosscheck:latest", Resources: x.requests(r)}},
				},
			},
		},
	}
	if _, err := x.c.Clientset().BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating job %s/%s: %v", ns, name, err)
	}
}

func ptr[T any](v T) *T { return &v }

func (x *checker) startService(ctx context.Context, t *testing.T, n string) {
	s := x.p.Services[n]
	x.job(ctx, t, s.Namespace, "svc-"+n, x.p.Queues[s.Queue].LocalQueue, s.Priority, s.Card, s.Request)
}

// servicesUp starts the always-on services, then the on-demand ones up in
// the state, each waiting for its admission (the model's order).
func (x *checker) servicesUp(ctx context.Context, t *testing.T, state map[string]string) {
	t.Helper()
	var order []string
	for _, n := range x.p.ServiceNames() {
		if x.p.Services[n].Mode == policy.AlwaysOn {
			order = append(order, n)
		}
	}
	for _, n := range x.p.OnDemandServices() {
		if state[n] == policy.ServiceUp {
			order = append(order, n)
		}
	}
	for _, n := range order {
		x.startService(ctx, t, n)
		err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			return x.workloads(ctx, t)["svc-"+n].admitted, nil
		})
		if err != nil {
			t.Fatalf("service %s never admitted: %v", n, err)
		}
	}
}

func (x *checker) submitJobs(ctx context.Context, t *testing.T, tp policy.Template, priority string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		x.job(ctx, t, tp.Namespace, fmt.Sprintf("job-%s-%d", tp.Name, i), x.p.Queues[tp.Queue].LocalQueue, priority, tp.Card, tp.Request)
	}
}

type wlState struct {
	admitted  bool
	preempted string // the Preempted condition's reason, "" if none
}

// workloads maps each cross-check Job (by name) to its Workload's state.
func (x *checker) workloads(ctx context.Context, t *testing.T) map[string]wlState {
	out := map[string]wlState{}
	for _, ns := range x.namespaces {
		list, err := x.c.Dynamic().Resource(contract.GVRWorkload).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("listing workloads in %s: %v", ns, err)
			continue
		}
		for _, wl := range list.Items {
			owner := ""
			for _, ref := range wl.GetOwnerReferences() {
				if ref.Kind == "Job" {
					owner = ref.Name
				}
			}
			if owner == "" {
				continue
			}
			st := wlState{admitted: clustertest.ConditionTrue(&wl, "Admitted")}
			if status, reason := clustertest.Condition(&wl, "Preempted"); status == "True" {
				st.preempted = reason
			}
			out[owner] = st
		}
	}
	return out
}

// waitAdmitted waits until exactly want workloads whose Job name starts
// with prefix are admitted, then checks it stays so for 3 s (Kueue admits
// no more than the model).
func (x *checker) waitAdmitted(ctx context.Context, t *testing.T, prefix string, want int64) {
	t.Helper()
	count := func() int64 {
		var n int64
		for name, w := range x.workloads(ctx, t) {
			if strings.HasPrefix(name, prefix) && w.admitted {
				n++
			}
		}
		return n
	}
	var got int64
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		got = count()
		return got >= want, nil
	})
	if err != nil {
		t.Fatalf("Kueue admitted %d %s* workloads, the model %d", got, prefix, want)
	}
	time.Sleep(3 * time.Second)
	if got = count(); got != want {
		t.Fatalf("Kueue admitted %d %s* workloads, the model %d", got, prefix, want)
	}
}

// reset deletes every cross-check Job and waits for their Workloads to go.
func (x *checker) reset(ctx context.Context, t *testing.T) {
	t.Helper()
	bg := metav1.DeletePropagationBackground
	for _, ns := range x.namespaces {
		err := x.c.Clientset().BatchV1().Jobs(ns).DeleteCollection(ctx,
			metav1.DeleteOptions{PropagationPolicy: &bg, GracePeriodSeconds: ptr[int64](0)},
			metav1.ListOptions{LabelSelector: labelCrossCheck + "=true"})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting jobs in %s: %v", ns, err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return len(x.workloads(ctx, t)) == 0, nil
	})
	if err != nil {
		t.Fatalf("workloads left after deleting the jobs: %v", x.workloads(ctx, t))
	}
}

// checkRow runs one capacity row against Kueue.
func (x *checker) checkRow(t *testing.T, r *admission.Report, row admission.Capacity) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	x.reset(ctx, t)
	x.servicesUp(ctx, t, row.State)
	want := row.QuotaAdmits
	if row.Preemption != nil {
		want = row.Preemption.QuotaAdmits
	}
	tp := x.p.Templates[row.BaseTemplate]
	x.submitJobs(ctx, t, tp, row.Priority, int(want)+2)
	x.waitAdmitted(ctx, t, "job-", want)
	wls := x.workloads(ctx, t)
	evicted := map[string]string{}
	for name, w := range wls {
		if w.preempted != "" {
			evicted[name] = w.preempted
		}
	}
	wantEvicted := map[string]string{}
	if row.Preemption != nil {
		for _, ev := range row.Preemption.Evicts {
			wantEvicted["svc-"+ev.Service] = ev.Reason
		}
	}
	if fmt.Sprint(evicted) != fmt.Sprint(wantEvicted) {
		t.Errorf("Kueue evicted %v, the model %v", evicted, wantEvicted)
	}
	t.Logf("Kueue and the model agree: %d admitted, evicted %v", want, evicted)
}
