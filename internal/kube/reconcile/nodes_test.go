package reconcile

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

func node(name string, labels map[string]string, capacity map[string]any, managers ...string) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"capacity": capacity, "allocatable": capacity}}}
	u.SetName(name)
	u.SetLabels(labels)
	var mf []metav1.ManagedFieldsEntry
	for _, m := range managers {
		mf = append(mf, metav1.ManagedFieldsEntry{Manager: m})
	}
	u.SetManagedFields(mf)
	return u
}

// Two card models on three nodes: one ready, one as the device plugin left
// it, one that left the selection; a third card has no node.
func TestNodeReport(t *testing.T) {
	p := &policy.Policy{DeclarationResource: "gpupolicy.dev/gpu-memory", Cards: map[string]policy.Card{
		"rtx-5060-ti": {Name: "rtx-5060-ti", MemoryMiB: 16311, NodeLabels: map[string]string{"nvidia.com/gpu.product": "A"}},
		"l4":          {Name: "l4", MemoryMiB: 22528, CardsPerNode: 2, NodeLabels: map[string]string{"nvidia.com/gpu.product": "B"}, NodeSelector: "nvidia.com/gpu.product=B"},
		"a100":        {Name: "a100", MemoryMiB: 40960, NodeLabels: map[string]string{"nvidia.com/gpu.product": "C"}},
	}}
	wants, err := NodeWants(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(wants) != 3 || wants[1].Card != "l4" || wants[1].Declaration != "45056Mi" {
		t.Fatalf("wants = %+v", wants)
	}
	r := nodeReport(wants, p.DeclarationResource, []unstructured.Unstructured{
		node("n2", map[string]string{"nvidia.com/gpu.product": "B"}, map[string]any{"nvidia.com/gpu": "8"}),
		node("n1", map[string]string{"nvidia.com/gpu.product": "A", policy.DevicePluginConfigLabel: "rtx-5060-ti"},
			map[string]any{"nvidia.com/gpu": "8", "gpupolicy.dev/gpu-memory": "16311Mi"}, NodeFieldManager),
		node("old", map[string]string{}, map[string]any{"gpupolicy.dev/gpu-memory": "16311Mi"}, NodeFieldManager),
		node("cpu", map[string]string{}, map[string]any{}),
	})
	if len(r.Nodes) != 3 || r.Nodes[0].Node != "n1" || !r.Nodes[0].Ready || r.Nodes[1].Node != "n2" || r.Nodes[1].Ready || !r.Nodes[2].Leaving {
		t.Fatalf("nodes = %+v", r.Nodes)
	}
	if len(r.Missing) != 1 || r.Missing[0].Card != "a100" {
		t.Errorf("missing = %+v", r.Missing)
	}
	fs := r.Findings()
	if len(fs) != 2 || fs[0].Rule != RuleNodeMissing.ID || fs[1].Rule != RuleNodeNotReady.ID || fs[1].Object != "Node/n2" {
		t.Fatalf("findings = %+v", fs)
	}
	for _, want := range []string{"every GPU step Kueue admits stays Pending: the node does not advertise gpupolicy.dev/gpu-memory", "want 45056Mi", "nvidia.com/device-plugin.config=l4"} {
		if !strings.Contains(fs[1].Message, want) {
			t.Errorf("%q lacks %q", fs[1].Message, want)
		}
	}
}
