package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupolicy/gpupolicy/drift/live"
	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
)

// gpuPod is a pod in experiments asking for one share and declaring 8 GiB of
// GPU memory, with the given labels: what a user of the namespace would
// start by hand.
func gpuPod(p *policy.Policy, name string, labels map[string]string) *corev1.Pod {
	rl := corev1.ResourceList{
		corev1.ResourceName(p.SharesResource()):    resource.MustParse("1"),
		corev1.ResourceName(p.DeclarationResource): resource.MustParse("8Gi"),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "experiments", Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "lab.local/by-hand:latest",
			Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}}},
	}
}

// declaring sets the GPU-memory declaration of a pod's container.
func declaring(p *policy.Policy, pod *corev1.Pod, amount string) *corev1.Pod {
	q := resource.MustParse(amount)
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Resources.Requests[corev1.ResourceName(p.DeclarationResource)] = q
		pod.Spec.Containers[i].Resources.Limits[corev1.ResourceName(p.DeclarationResource)] = q
	}
	return pod
}

// TestAdmissionPolicy: after reconcile, the API server itself rejects a GPU
// pod outside Kueue, a pod at a priority its namespace may not use and a pod
// declaring more GPU memory than its queue could ever admit, with the
// policy's message; an allowed pod passes, and a Workflow through the
// rendered template at an allowed priority still runs.
func TestAdmissionPolicy(t *testing.T) {
	c := clustertest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p, err := clustertest.LabPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if err := clustertest.Deploy(ctx, c, p); err != nil {
		t.Fatal(err)
	}
	pods := c.Clientset().CoreV1().Pods("experiments")
	// A dry run goes through admission and stores nothing, so a policy that
	// failed to reject leaves no pod behind.
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	rejected := func(t *testing.T, pod *corev1.Pod, rule string, want ...string) {
		t.Helper()
		var last error
		// The API server picks a new policy up within a few seconds.
		clustertest.WaitFor(t, ctx, pod.Name+" rejected", func(ctx context.Context) (bool, error) {
			_, last = pods.Create(ctx, pod, dry)
			return last != nil && strings.Contains(last.Error(), rule), nil
		})
		for _, w := range want {
			if !strings.Contains(last.Error(), w) {
				t.Errorf("rejection of %s = %q, want it to say %q", pod.Name, last, w)
			}
		}
	}
	t.Run("GPU pod without a LocalQueue", func(t *testing.T) {
		rejected(t, gpuPod(p, "by-hand", nil), contract.RuleGPUOutsideKueue,
			"ValidatingAdmissionPolicy", "policy "+p.Name, contract.LabelKueueQueue, "gpu-step")
	})
	t.Run("always-on priority in experiments", func(t *testing.T) {
		rejected(t, gpuPod(p, "sneaky", map[string]string{
			contract.LabelKueueQueue:    p.Queues["gpu-general"].LocalQueue,
			contract.LabelKueuePriority: "always-on",
		}), contract.RulePriorityNotAllowed, "always-on", "use one of: training")
	})
	t.Run("a LocalQueue of another namespace", func(t *testing.T) {
		rejected(t, gpuPod(p, "borrowed-queue", map[string]string{
			contract.LabelKueueQueue: p.Queues["gpu-large-model"].LocalQueue,
		}), contract.RuleQueueNotAllowed)
	})
	t.Run("a declaration above what its queue could ever admit", func(t *testing.T) {
		ceil, ok := admission.DeclarationCeiling(p, "gpu-general")
		if !ok || ceil.MiB != 16311 {
			t.Fatalf("gpu-general's ceiling %+v, want the card's 16,311 MiB", ceil)
		}
		pod := declaring(p, gpuPod(p, "too-big", map[string]string{
			contract.LabelKueueQueue:    p.Queues["gpu-general"].LocalQueue,
			contract.LabelKueuePriority: "batch",
		}), policy.MiBString(ceil.MiB+1))
		rejected(t, pod, contract.RuleDeclarationOverQueue,
			"ValidatingAdmissionPolicy", "LocalQueue gpu-general admits no pod declaring 16312 MiB",
			"ClusterQueue gpu-general can hold at most 16,311 MiB", "insufficient quota", "declare at most 16,311 MiB (gpupolicy.dev/gpu-memory: 16311Mi)")
		// At the ceiling it passes: the line is Kueue's, not one MiB lower.
		at := declaring(p, gpuPod(p, "at-ceiling", pod.Labels), policy.MiBString(ceil.MiB))
		if _, err := pods.Create(ctx, at, dry); err != nil {
			t.Fatalf("a pod declaring the queue's ceiling: %v", err)
		}
	})
	t.Run("an allowed pod passes", func(t *testing.T) {
		pod := gpuPod(p, "allowed", map[string]string{
			contract.LabelKueueQueue:    p.Queues["gpu-general"].LocalQueue,
			contract.LabelKueuePriority: "batch",
		})
		if _, err := pods.Create(ctx, pod, dry); err != nil {
			t.Fatalf("a pod through the namespace's queue at batch: %v", err)
		}
	})
	t.Run("a Workflow through the template still runs", func(t *testing.T) {
		waitWorkflow(t, ctx, c, submitStep(t, ctx, c), "Succeeded")
	})
	t.Run("drift --live reports what came in before the policy", func(t *testing.T) {
		slippedIn(t, ctx, c, p)
	})
}

// slippedIn unbinds the experiments namespace's admission policy, starts
// there the two pods it rejects (as before the policy existed), binds it
// again, and checks that live drift reports both: the pod outside Kueue and
// the Workload Kueue made at the always-on priority.
func slippedIn(t *testing.T, ctx context.Context, c *cluster.Cluster, p *policy.Policy) {
	bindings := c.Dynamic().Resource(contract.GVRValidatingAdmissionPolicyBinding)
	name := contract.AdmissionPolicyPrefix + "experiments"
	if err := bindings.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := c.Clientset().CoreV1().Pods("experiments")
	outside := gpuPod(p, "before-policy", nil)
	sneaky := gpuPod(p, "before-policy-always-on", map[string]string{
		contract.LabelKueueQueue:    p.Queues["gpu-general"].LocalQueue,
		contract.LabelKueuePriority: "always-on",
	})
	t.Cleanup(func() {
		for _, n := range []string{outside.Name, sneaky.Name} {
			_ = pods.Delete(context.Background(), n, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}
	})
	for _, pod := range []*corev1.Pod{outside, sneaky} {
		clustertest.WaitFor(t, ctx, pod.Name+" created with the policy unbound", func(ctx context.Context) (bool, error) {
			_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
			return err == nil || apierrors.IsAlreadyExists(err), nil
		})
	}
	clustertest.WaitFor(t, ctx, "Kueue's Workload for "+sneaky.Name, func(ctx context.Context) (bool, error) {
		l, err := c.Dynamic().Resource(contract.GVRWorkload).Namespace("experiments").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, w := range l.Items {
			for _, o := range w.GetOwnerReferences() {
				if o.Name == sneaky.Name {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err := clustertest.Deploy(ctx, c, p); err != nil { // binds it again
		t.Fatal(err)
	}
	_, ro := clients(t, ctx, c, "bypass-reader")
	bs, err := live.Bypasses(ctx, ro.Dynamic, p)
	if err != nil {
		t.Fatal(err)
	}
	var gotPod, gotPriority bool
	for _, b := range bs {
		t.Logf("%s: %s", b.Rule, b.Message)
		switch {
		case b.Rule == contract.RuleGPUOutsideKueue && b.Name == outside.Name:
			gotPod = strings.Contains(b.Message, "1 share") && strings.Contains(b.Message, "8,192 MiB") && strings.Contains(b.Message, "gpu-general")
		case b.Rule == contract.RulePriorityNotAllowed && b.Kind == "Workload":
			gotPriority = strings.Contains(b.Message, "always-on") && strings.Contains(b.Message, "batch")
		}
	}
	if !gotPod || !gotPriority {
		t.Errorf("bypasses = %+v: want the pod outside Kueue (%v) and the always-on Workload (%v), in the lab's words", bs, gotPod, gotPriority)
	}
	r := &live.Report{}
	r.Live.Bypasses = bs
	if len(r.Findings()) != len(bs) {
		t.Errorf("findings = %v, want one per bypass", r.Findings())
	}
}
