package reconcile

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func TestOrder(t *testing.T) {
	in := []*unstructured.Unstructured{
		obj("WorkflowTemplate", "experiments", "gpu-step"),
		obj("LocalQueue", "experiments", "gpu-general"),
		obj("ClusterQueue", "", "gpu-general"),
		obj("ConfigMap", "experiments", "gpu-semaphore"),
		obj("Namespace", "", "experiments"),
		obj("WorkloadPriorityClass", "", "batch"),
		obj("ResourceFlavor", "", "rtx-5060-ti"),
		obj("Namespace", "", "llm"),
		obj("LimitRange", "experiments", "gpu-memory-default"),
	}
	var got []string
	for _, o := range Order(in) {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	want := []string{
		"Namespace/experiments", "Namespace/llm",
		"ResourceFlavor/rtx-5060-ti", "WorkloadPriorityClass/batch",
		"ClusterQueue/gpu-general",
		"ConfigMap/gpu-semaphore", "LimitRange/gpu-memory-default",
		"LocalQueue/gpu-general",
		"WorkflowTemplate/gpu-step",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order = %v\nwant    %v", got, want)
		}
	}
}
