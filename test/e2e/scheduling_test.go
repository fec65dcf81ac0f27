package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/drift/live"
	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/internal/kube/reconcile"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
)

const notAdvertised = "every GPU step Kueue admits stays Pending: the node does not advertise gpupolicy.dev/gpu-memory"

// TestGPUStepRunsOnceNodesAreReady: the local cluster's GPU node starts as a
// real one, advertising nvidia.com/gpu and nothing of the declaration. A
// rendered GPU step is admitted by Kueue and stays Pending with the
// scheduler's reason, and live drift says why; node readiness (reconcile)
// makes the node advertise the declaration and the same step runs to
// completion; a node that loses its advertisement is reported and put back;
// a second card model's node is made ready and, when it leaves the
// selection, has both taken off; a card with no node is a finding.
func TestGPUStepRunsOnceNodesAreReady(t *testing.T) {
	c := clustertest.Fresh(t) // asserts what a fresh cluster holds
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	set, p := localRender(t)
	admin, ro := clients(t, ctx, c, "node-reader")
	r := &reconcile.Reconciler{Client: admin.Dynamic, Mapper: admin.Mapper}
	// The render only: clustertest.Deploy would make the nodes ready too.
	if _, err := r.Apply(ctx, objects(set), reconcile.Options{Owner: owner}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range p.Namespaces() {
		if err := c.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	liveReport := func(t *testing.T) (*live.Report, string) {
		t.Helper()
		side := &live.Side{Client: ro.Dynamic, Mapper: ro.Mapper, Pinned: set, Owner: owner, Name: "the cluster", Where: "local"}
		rep, err := live.Check(ctx, side, &drift.Report{Environment: "local"}, p)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := rep.Text(&b); err != nil {
			t.Fatal(err)
		}
		return rep, b.String()
	}

	t.Run("no node advertises the declaration on a fresh cluster", func(t *testing.T) {
		for _, name := range c.NodeNames() {
			n, err := admin.Dynamic.Resource(reconcile.NodesGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := unstructured.NestedString(n.Object, "status", "capacity", string(cluster.ResourceGPUMemory)); ok {
				t.Errorf("node %s advertises %s before reconcile", name, cluster.ResourceGPUMemory)
			}
			if v, ok := n.GetLabels()[policy.DevicePluginConfigLabel]; ok {
				t.Errorf("node %s carries %s=%s before reconcile", name, policy.DevicePluginConfigLabel, v)
			}
		}
	})

	wf := submitStep(t, ctx, c)
	t.Run("before reconcile: admitted by Kueue, Pending with the scheduler's reason", func(t *testing.T) {
		var reason string
		clustertest.WaitFor(t, ctx, "the step's pod unschedulable after admission", func(ctx context.Context) (bool, error) {
			pods, err := c.Clientset().CoreV1().Pods("experiments").List(ctx, metav1.ListOptions{LabelSelector: contract.LabelArgoWorkflow + "=" + wf})
			if err != nil || len(pods.Items) == 0 {
				return false, err
			}
			for _, cond := range pods.Items[0].Status.Conditions {
				if cond.Type == "PodScheduled" && cond.Status == "False" && cond.Reason == "Unschedulable" {
					reason = cond.Message
					return true, nil
				}
			}
			return false, nil
		})
		if !strings.Contains(reason, "Insufficient gpupolicy.dev/gpu-memory") {
			t.Errorf("scheduler's reason %q lacks Insufficient gpupolicy.dev/gpu-memory", reason)
		}
		wls, err := admin.Dynamic.Resource(contract.GVRWorkload).Namespace("experiments").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		admitted := 0
		for _, w := range wls.Items {
			if clustertest.ConditionTrue(&w, "Admitted") {
				admitted++
			}
		}
		if admitted == 0 {
			t.Error("no Workload admitted: the step should be admitted and then stay Pending")
		}
		rep, text := liveReport(t)
		if !rep.Drifted() || len(rep.Live.Unschedulable) == 0 {
			t.Errorf("live drift misses the pending step: %+v", rep.Live)
		}
		for _, want := range []string{"GPU node " + cluster.DefaultNodeName + " (card rtx-5060-ti): " + notAdvertised, "Insufficient gpupolicy.dev/gpu-memory"} {
			if !strings.Contains(text, want) {
				t.Errorf("drift --live text lacks %q:\n%s", want, text)
			}
		}
		rules := map[string]bool{}
		for _, f := range rep.Findings() {
			rules[f.Rule] = true
		}
		if !rules[reconcile.RuleNodeNotReady.ID] || !rules[reconcile.RulePodUnschedulable.ID] {
			t.Errorf("findings %v", rep.Findings())
		}
	})

	t.Run("a dry run changes no node", func(t *testing.T) {
		ch, _, err := r.ReadyNodes(ctx, p, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ch) != 1 || ch[0].Name != cluster.DefaultNodeName || ch[0].Action != reconcile.Configured {
			t.Errorf("dry run: %+v", ch)
		}
		rep, err := reconcile.ReadNodes(ctx, ro.Dynamic, p)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Ready() {
			t.Error("the dry run made the node ready")
		}
	})

	t.Run("after reconcile the same step runs to completion", func(t *testing.T) {
		ch, rep, err := r.ReadyNodes(ctx, p, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ch) != 1 || ch[0].Action != reconcile.Configured || len(rep.Findings()) != 0 {
			t.Errorf("node readiness: %+v, findings after %v", ch, rep.Findings())
		}
		again, _, err := r.ReadyNodes(ctx, p, false, nil)
		if err != nil || len(again) != 1 || again[0].Action != reconcile.Unchanged {
			t.Errorf("second run: %+v, %v", again, err)
		}
		n, err := admin.Dynamic.Resource(reconcile.NodesGVR).Get(ctx, cluster.DefaultNodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedString(n.Object, "status", "allocatable", "gpupolicy.dev/gpu-memory"); got != "16311Mi" {
			t.Errorf("allocatable gpupolicy.dev/gpu-memory = %q, want 16311Mi", got)
		}
		if got, _, _ := unstructured.NestedString(n.Object, "status", "capacity", "nvidia.com/gpu"); got != "8" {
			t.Errorf("nvidia.com/gpu = %q: node readiness touched the device plugin's resource", got)
		}
		if n.GetLabels()[policy.DevicePluginConfigLabel] != "rtx-5060-ti" {
			t.Errorf("labels %v", n.GetLabels())
		}
		waitWorkflow(t, ctx, c, wf, "Succeeded")
		rep2, text := liveReport(t)
		if !rep2.Live.Nodes.Ready() || len(rep2.Live.Unschedulable) > 0 {
			t.Errorf("after reconcile:\n%s", text)
		}
	})

	t.Run("a node that loses its advertisement is reported and put back", func(t *testing.T) {
		patch := `[{"op":"remove","path":"/status/capacity/gpupolicy.dev~1gpu-memory"},{"op":"remove","path":"/status/allocatable/gpupolicy.dev~1gpu-memory"}]`
		if _, err := admin.Dynamic.Resource(reconcile.NodesGVR).Patch(ctx, cluster.DefaultNodeName, types.JSONPatchType, []byte(patch),
			metav1.PatchOptions{FieldManager: "kubelet-restart"}, "status"); err != nil {
			t.Fatal(err)
		}
		_, text := liveReport(t)
		if !strings.Contains(text, notAdvertised) {
			t.Errorf("drift --live does not report the lost advertisement:\n%s", text)
		}
		ch, _, err := r.ReadyNodes(ctx, p, false, nil)
		if err != nil || len(ch) != 1 || ch[0].Action != reconcile.Configured {
			t.Fatalf("putting it back: %+v, %v", ch, err)
		}
		if rep, _ := liveReport(t); !rep.Live.Nodes.Ready() {
			t.Errorf("not ready after reconcile: %+v", rep.Live.Nodes)
		}
	})

	t.Run("a second card model's node, then it leaves the selection", func(t *testing.T) {
		two := withCard(p, policy.Card{Name: "l4", Model: "NVIDIA L4", MemoryMiB: 23034, Shares: 4, CardsPerNode: 1,
			NodeLabels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4-SHARED"}})
		ch, rep, err := r.ReadyNodes(ctx, two, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ch) != 2 || ch[0].Action != reconcile.Unchanged || ch[1].Name != cluster.SecondNodeName || ch[1].Action != reconcile.Configured || len(rep.Missing) != 0 {
			t.Errorf("two cards: %+v", ch)
		}
		n, _ := admin.Dynamic.Resource(reconcile.NodesGVR).Get(ctx, cluster.SecondNodeName, metav1.GetOptions{})
		if got, _, _ := unstructured.NestedString(n.Object, "status", "capacity", "gpupolicy.dev/gpu-memory"); got != "23034Mi" || n.GetLabels()[policy.DevicePluginConfigLabel] != "l4" {
			t.Errorf("%s: declaration %q, labels %v", cluster.SecondNodeName, got, n.GetLabels())
		}
		ch, _, err = r.ReadyNodes(ctx, p, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ch) != 2 || ch[1].Name != cluster.SecondNodeName || ch[1].Action != reconcile.Pruned {
			t.Errorf("leaving: %+v", ch)
		}
		n, _ = admin.Dynamic.Resource(reconcile.NodesGVR).Get(ctx, cluster.SecondNodeName, metav1.GetOptions{})
		if _, ok, _ := unstructured.NestedString(n.Object, "status", "capacity", "gpupolicy.dev/gpu-memory"); ok {
			t.Errorf("%s still advertises the declaration after leaving the selection", cluster.SecondNodeName)
		}
		if _, ok := n.GetLabels()[policy.DevicePluginConfigLabel]; ok {
			t.Errorf("%s still carries the config label after leaving the selection", cluster.SecondNodeName)
		}
		if got, _, _ := unstructured.NestedString(n.Object, "status", "capacity", "nvidia.com/gpu"); got != "4" {
			t.Errorf("nvidia.com/gpu = %q after leaving", got)
		}
		again, _, err := r.ReadyNodes(ctx, p, false, nil)
		if err != nil || len(again) != 1 {
			t.Errorf("after leaving, node readiness still sees %+v (%v)", again, err)
		}
	})

	t.Run("a card whose selector matches no node is a finding, not an error", func(t *testing.T) {
		none := withCard(p, policy.Card{Name: "a100", Model: "A100", MemoryMiB: 40960, Shares: 1, CardsPerNode: 1,
			NodeLabels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100"}})
		_, rep, err := r.ReadyNodes(ctx, none, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		fs := rep.Findings()
		if len(fs) != 1 || fs[0].Rule != reconcile.RuleNodeMissing.ID || !strings.Contains(fs[0].Message, "card a100: no node matches") {
			t.Errorf("findings %v", fs)
		}
	})
}

// clients returns an admin client and one for a read-only identity named
// reader (get, list and watch only).
func clients(t *testing.T, ctx context.Context, c *cluster.Cluster, reader string) (admin, ro *kube.Clients) {
	t.Helper()
	admin, err := kube.ForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	u, err := c.ReadOnlyUser(ctx, reader)
	if err != nil {
		t.Fatal(err)
	}
	if ro, err = kube.New(u.Kubeconfig, ""); err != nil {
		t.Fatal(err)
	}
	return admin, ro
}

func withCard(p *policy.Policy, card policy.Card) *policy.Policy {
	q := *p
	q.Cards = map[string]policy.Card{card.Name: card}
	for n, c := range p.Cards {
		q.Cards[n] = c
	}
	return &q
}

// submitStep submits one Workflow of the rendered cache-free GPU step
// template, running 3 s on the simulated node, and returns its name.
func submitStep(t *testing.T, ctx context.Context, c *cluster.Cluster) string {
	t.Helper()
	objs, err := cluster.DecodeYAML([]byte(fmt.Sprintf(`
apiVersion: %s
kind: Workflow
metadata:
  generateName: gpu-step-
  namespace: experiments
spec:
  workflowTemplateRef: {name: gpu-step-no-cache}
  arguments:
    parameters:
    - {name: priority, value: training}
  podMetadata:
    annotations: {%s: "3"}
`, contract.ArgoAPIVersion, cluster.AnnotationRunSeconds)))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := c.Dynamic().Resource(contract.GVRWorkflow).Namespace("experiments").Create(ctx, objs[0], metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Dynamic().Resource(contract.GVRWorkflow).Namespace("experiments").Delete(context.Background(), wf.GetName(), metav1.DeleteOptions{})
	})
	return wf.GetName()
}

func waitWorkflow(t *testing.T, ctx context.Context, c *cluster.Cluster, name, want string) {
	t.Helper()
	clustertest.WaitFor(t, ctx, "workflow "+name+" "+want, func(ctx context.Context) (bool, error) {
		wf, err := c.Dynamic().Resource(contract.GVRWorkflow).Namespace("experiments").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(wf.Object, "status", "phase")
		if phase == "Failed" || phase == "Error" {
			msg, _, _ := unstructured.NestedString(wf.Object, "status", "message")
			return false, clustertest.Fatal{Err: fmt.Errorf("workflow %s: %s", phase, msg)}
		}
		return phase == want, nil
	})
}
