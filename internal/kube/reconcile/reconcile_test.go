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
		obj("Cohort", "", "gpu"),
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
		"Cohort/gpu", "ResourceFlavor/rtx-5060-ti", "WorkloadPriorityClass/batch",
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

// An apply that changes nothing is unchanged even when a controller wrote
// the object's status meanwhile (the API server type-checking a
// ValidatingAdmissionPolicy); a changed spec field is not.
func TestSameApart(t *testing.T) {
	obj := func(rv, quota, status string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
			"metadata": map[string]any{"name": "gpupolicy-experiments", "resourceVersion": rv, "generation": int64(1),
				"managedFields": []any{map[string]any{"manager": rv}}},
			"spec":   map[string]any{"failurePolicy": quota},
			"status": map[string]any{"typeChecking": status},
		}}
	}
	if !sameApart(obj("10", "Fail", ""), obj("11", "Fail", "checked")) {
		t.Error("a status write made the apply count as configured")
	}
	if sameApart(obj("10", "Fail", ""), obj("11", "Ignore", "")) {
		t.Error("a spec change counted as unchanged")
	}
}
