package live

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// PendingPod is a pod that declares GPU memory and that the scheduler
// cannot place.
type PendingPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Reason is the scheduler's message (PodScheduled=False, reason
	// Unschedulable), e.g. "0/2 nodes are available: 2 Insufficient
	// gpupolicy.dev/gpu-memory."
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Unschedulable lists the Pending pods that request the declaration
// resource decl and that the scheduler found no node for. It only lists.
func Unschedulable(ctx context.Context, client dynamic.Interface, decl string) ([]PendingPod, error) {
	list, err := client.Resource(podsGVR).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Pending"})
	if err != nil {
		return nil, err
	}
	out := []PendingPod{}
	for _, p := range list.Items {
		if !requests(&p, decl) {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] != "PodScheduled" || m["status"] != "False" || m["reason"] != "Unschedulable" {
				continue
			}
			msg, _ := m["message"].(string)
			out = append(out, PendingPod{Namespace: p.GetNamespace(), Name: p.GetName(), Reason: msg,
				Message: fmt.Sprintf("pod %s/%s declares %s but no node can run it (the scheduler: %q): it holds quota and its lock while it waits",
					p.GetNamespace(), p.GetName(), decl, msg)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out, nil
}

func requests(p *unstructured.Unstructured, decl string) bool {
	cs, _, _ := unstructured.NestedSlice(p.Object, "spec", "containers")
	for _, c := range cs {
		if _, ok, _ := unstructured.NestedString(c.(map[string]any), "resources", "requests", decl); ok {
			return true
		}
	}
	return false
}
