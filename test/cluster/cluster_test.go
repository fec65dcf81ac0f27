package cluster_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
)

// One cluster serves every test in the package; clustertest.Main stops it
// and checks that nothing is left behind.
func TestMain(m *testing.M) { os.Exit(clustertest.Main(m)) }

func labCluster(t *testing.T) *cluster.Cluster { return clustertest.Shared(t) }

// readyLabNodes makes the lab policy's GPU node advertise the declaration
// through reconcile's node readiness: the pods here declare GPU memory, and
// the node, like a real one, starts without it.
func readyLabNodes(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	p, err := clustertest.LabPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if err := clustertest.ReadyNodes(ctx, c, p); err != nil {
		t.Fatal(err)
	}
}

const labQueues = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: rtx-5060-ti
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: gpu-general
spec:
  cohortName: gpu
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu", "memory", "gpupolicy.dev/gpu-memory"]
    flavors:
    - name: rtx-5060-ti
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
      - name: memory
        nominalQuota: 12Gi
      - name: gpupolicy.dev/gpu-memory
        nominalQuota: 16311Mi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: gpu-general
  namespace: experiments
spec:
  clusterQueue: gpu-general
`

func gpuResources(memory string) corev1.ResourceRequirements {
	rl := corev1.ResourceList{
		cluster.ResourceGPU:       resource.MustParse("1"),
		corev1.ResourceMemory:     resource.MustParse(memory),
		cluster.ResourceGPUMemory: resource.MustParse("1024Mi"),
	}
	return corev1.ResourceRequirements{Requests: rl, Limits: rl}
}

// TestKueueAdmitsFourBatchJobs reproduces the lab with the 7B down: the four
// always-on models hold 4 shares and 4 GiB of host memory in gpu-general, so
// of five small batch jobs (1 share, 2 GiB, 1,024 MiB declared) exactly four
// are admitted — shares and host memory both bind at 4 — and the fifth waits
// until one finishes.
func TestKueueAdmitsFourBatchJobs(t *testing.T) {
	c := labCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs := c.Clientset()
	const ns = "experiments"
	if err := c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, []byte(labQueues)); err != nil {
		t.Fatal(err)
	}
	readyLabNodes(t, ctx, c)
	t.Cleanup(func() {
		bg := metav1.DeletePropagationBackground
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{PropagationPolicy: &bg})
		_ = c.Dynamic().Resource(contract.GVRClusterQueue).Delete(context.Background(), "gpu-general", metav1.DeleteOptions{})
		_ = c.Dynamic().Resource(contract.GVRResourceFlavor).Delete(context.Background(), "rtx-5060-ti", metav1.DeleteOptions{})
	})
	clustertest.WaitFor(t, ctx, "ClusterQueue gpu-general active", func(ctx context.Context) (bool, error) {
		cq, err := c.Dynamic().Resource(contract.GVRClusterQueue).Get(ctx, "gpu-general", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return clustertest.ConditionTrue(cq, "Active"), nil
	})

	// The four always-on models: plain pods through Kueue's pod integration,
	// running until deleted.
	for i := range 4 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("always-on-%d", i),
				Labels: map[string]string{"kueue.x-k8s.io/queue-name": "gpu-general", "app": "always-on"},
			},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyAlways,
				Containers:    []corev1.Container{{Name: "model", Image: "lab.local/model-server:latest", Resources: gpuResources("1Gi")}},
			},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.WaitFor(t, ctx, "4 always-on pods running on the GPU node", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, cs, ns, "app=always-on", c.NodeName()) == 4, nil
	})

	// Five batch jobs of 20 s each.
	for i := range 5 {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("batch-%d", i),
				Labels: map[string]string{"kueue.x-k8s.io/queue-name": "gpu-general"},
			},
			Spec: batchv1.JobSpec{
				BackoffLimit: ptr.To[int32](0),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{
						Labels:      map[string]string{"app": "batch"},
						Annotations: map[string]string{cluster.AnnotationRunSeconds: "20"},
					},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers:    []corev1.Container{{Name: "cuda-test", Image: "lab.local/cuda-test:latest", Resources: gpuResources("2Gi")}},
					},
				},
			},
		}
		if _, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	var admitted, pending []string
	clustertest.WaitFor(t, ctx, "4 of 5 batch workloads admitted", func(ctx context.Context) (bool, error) {
		var err error
		admitted, pending, err = jobWorkloads(ctx, c, ns)
		return len(admitted) == 4 && len(pending) == 1, err
	})
	// The fifth must keep waiting while the four run (they run 20 s).
	time.Sleep(5 * time.Second)
	admitted, pending, err := jobWorkloads(ctx, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(admitted) != 4 || len(pending) != 1 {
		t.Fatalf("after 5 s: admitted %v, pending %v; want 4 admitted and 1 pending", admitted, pending)
	}
	t.Logf("admitted %v; pending %v", admitted, pending)
	if n := countRunning(ctx, cs, ns, "app=batch", c.NodeName()); n != 4 {
		t.Errorf("%d batch pods running on %s, want 4", n, c.NodeName())
	}

	clustertest.WaitFor(t, ctx, "all 5 batch jobs complete", func(ctx context.Context) (bool, error) {
		jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		done := 0
		for _, j := range jobs.Items {
			for _, cond := range j.Status.Conditions {
				if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
					return false, clustertest.Fatal{Err: fmt.Errorf("job %s failed: %s", j.Name, cond.Message)}
				}
				if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
					done++
				}
			}
		}
		return done == 5, nil
	})
}

// jobWorkloads returns the names of the Job workloads in ns that have
// reserved quota and those that have not.
func jobWorkloads(ctx context.Context, c *cluster.Cluster, ns string) (admitted, pending []string, err error) {
	list, err := c.Dynamic().Resource(contract.GVRWorkload).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, wl := range list.Items {
		owners := wl.GetOwnerReferences()
		if len(owners) == 0 || owners[0].Kind != "Job" {
			continue
		}
		if clustertest.ConditionTrue(&wl, "QuotaReserved") || clustertest.ConditionTrue(&wl, "Admitted") {
			admitted = append(admitted, owners[0].Name)
		} else {
			pending = append(pending, owners[0].Name)
		}
	}
	sort.Strings(admitted)
	sort.Strings(pending)
	return admitted, pending, nil
}

func countRunning(ctx context.Context, cs kubernetes.Interface, ns, selector, node string) int {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return -1
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node {
			n++
		}
	}
	return n
}

// TestArgoWorkflowSucceeds runs a one-step Workflow whose pod runs on the
// simulated GPU node, and waits for the real workflow-controller to mark it
// Succeeded.
func TestArgoWorkflowSucceeds(t *testing.T) {
	c := labCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "workflows"
	if err := c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Clientset().CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	readyLabNodes(t, ctx, c)
	objs, err := cluster.DecodeYAML([]byte(`
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  generateName: one-step-
spec:
  entrypoint: cuda-test
  templates:
  - name: cuda-test
    metadata:
      annotations:
        gpupolicy.dev/run-seconds: "3"
    container:
      image: lab.local/cuda-test:latest
      command: [python, -c, "print('ok')"]
      resources:
        requests: {nvidia.com/gpu: 1, memory: 2Gi, gpupolicy.dev/gpu-memory: 1024Mi}
        limits: {nvidia.com/gpu: 1, memory: 2Gi, gpupolicy.dev/gpu-memory: 1024Mi}
`))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := c.Dynamic().Resource(contract.GVRWorkflow).Namespace(ns).Create(ctx, objs[0], metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := wf.GetName()
	var phase string
	clustertest.WaitFor(t, ctx, "workflow "+name+" Succeeded", func(ctx context.Context) (bool, error) {
		wf, err := c.Dynamic().Resource(contract.GVRWorkflow).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ = unstructured.NestedString(wf.Object, "status", "phase")
		if phase == "Failed" || phase == "Error" {
			msg, _, _ := unstructured.NestedString(wf.Object, "status", "message")
			return false, clustertest.Fatal{Err: fmt.Errorf("workflow %s: %s", phase, msg)}
		}
		return phase == "Succeeded", nil
	})
	wf, err = c.Dynamic().Resource(contract.GVRWorkflow).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	var hosts []string
	for _, n := range nodes {
		m, _ := n.(map[string]any)
		if m["type"] == "Pod" {
			host, _ := m["hostNodeName"].(string)
			hosts = append(hosts, host)
		}
	}
	if len(hosts) != 1 || hosts[0] != c.NodeName() {
		t.Errorf("pod nodes ran on %v, want [%s]", hosts, c.NodeName())
	}
}

// TestReadOnlyUser checks that a minted get/list/watch identity can read but
// not write.
func TestReadOnlyUser(t *testing.T) {
	c := labCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := c.ReadOnlyUser(ctx, "drift-reader")
	if err != nil {
		t.Fatal(err)
	}
	ro, err := kubernetes.NewForConfig(u.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.CoreV1().Nodes().Get(ctx, c.NodeName(), metav1.GetOptions{}); err != nil {
		t.Fatalf("read-only user cannot get the node: %v", err)
	}
	if _, err := ro.CoreV1().ConfigMaps(cluster.ArgoNamespace).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("read-only user cannot list ConfigMaps: %v", err)
	}
	_, err = ro.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "nope"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("read-only user creating a ConfigMap: got %v, want Forbidden", err)
	}
	if _, err := os.Stat(u.Kubeconfig); err != nil {
		t.Fatal(err)
	}
}
