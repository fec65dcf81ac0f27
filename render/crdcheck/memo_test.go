package crdcheck

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// TestOpenAPIMemoAppliesToEmbeddedCRDs: the memo is on for every
// embedded CRD whose schema leaves metadata to the API server, and only
// for an exact {type: object}.
func TestOpenAPIMemoAppliesToEmbeddedCRDs(t *testing.T) {
	v := validator(t)
	cq := schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "ClusterQueue"}
	for _, gvk := range v.Kinds() {
		cv := v.byGVK[gvk]
		cv.load()
		if gvk == cq && !cv.memo.enabled {
			t.Errorf("%s: memo off, its metadata is {type: object}", gvk)
		}
	}
	obj := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}}
	withName := obj
	withName.Properties = map[string]spec.Schema{"name": {SchemaProps: spec.SchemaProps{MaxLength: new(int64)}}}
	for name, c := range map[string]struct {
		root spec.Schema
		want bool
	}{
		"any object":        {spec.Schema{SchemaProps: spec.SchemaProps{Properties: map[string]spec.Schema{"metadata": obj}}}, true},
		"a name limit":      {spec.Schema{SchemaProps: spec.SchemaProps{Properties: map[string]spec.Schema{"metadata": withName}}}, false},
		"no metadata":       {spec.Schema{}, false},
		"metadata a string": {spec.Schema{SchemaProps: spec.SchemaProps{Properties: map[string]spec.Schema{"metadata": {SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}}}}}}, false},
	} {
		if got := metadataIsAnyObject(&c.root); got != c.want {
			t.Errorf("%s: metadataIsAnyObject = %v, want %v", name, got, c.want)
		}
	}
}

// TestOpenAPIMemoGivesFreshErrors: objects checked after one equal to
// them but for metadata get the errors a check of their own gives, and
// ones that differ anywhere else (a value, a number's type) get their
// own.
func TestOpenAPIMemoGivesFreshErrors(t *testing.T) {
	v := build() // its own memo, not the process-wide Validator's
	bad := func(name string) *unstructured.Unstructured {
		u := clusterQueue(name).cohort("gpu").obj(t)
		if err := unstructured.SetNestedField(u.Object, int64(7), "spec", "queueingStrategy"); err != nil {
			t.Fatal(err)
		}
		return u
	}
	good := func(name string) *unstructured.Unstructured { return clusterQueue(name).cohort("gpu").obj(t) }
	floatStrategy := bad("f")
	if err := unstructured.SetNestedField(floatStrategy.Object, float64(7), "spec", "queueingStrategy"); err != nil {
		t.Fatal(err)
	}
	cv := v.byGVK[schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "ClusterQueue"}]
	cv.load()
	for i, u := range []*unstructured.Unstructured{bad("a"), bad("b"), good("c"), good("d"), floatStrategy, bad("e"), good("g")} {
		fresh := cv.openapiErrorsUncached(u.DeepCopy().Object)
		got := cv.openapiErrors(u.DeepCopy().Object)
		if a, b := errorStrings(got), errorStrings(fresh); !equalStrings(a, b) {
			t.Errorf("object %d (%s): memo gives %q, a fresh check %q", i, u.GetName(), a, b)
		}
		if want := u.GetName() != "c" && u.GetName() != "d" && u.GetName() != "g"; (len(fresh) > 0) != want {
			t.Errorf("object %d (%s): %d errors, want some: %v", i, u.GetName(), len(fresh), want)
		}
	}
	if n := len(cv.memo.errs); n != 3 {
		t.Errorf("%d contents remembered, want 3 (the bad, the good, the float)", n)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestContentKey: equal but for metadata, equal keys; any other
// difference, other keys.
func TestContentKey(t *testing.T) {
	key := func(u map[string]any) string {
		k, ok := contentKey(u)
		if !ok {
			t.Fatalf("no key for %v", u)
		}
		return k
	}
	base := func() map[string]any {
		return map[string]any{"apiVersion": "v", "kind": "K", "metadata": map[string]any{"name": "a"},
			"spec": map[string]any{"n": int64(1), "l": []any{"x", true, nil}, "s": "ab"}}
	}
	k0 := key(base())
	other := base()
	other["metadata"] = map[string]any{"name": "b", "labels": map[string]any{"x": "y"}}
	if key(other) != k0 {
		t.Error("metadata changed the key")
	}
	for name, change := range map[string]func(map[string]any){
		"no metadata":     func(u map[string]any) { delete(u, "metadata") },
		"metadata no map": func(u map[string]any) { u["metadata"] = "x" },
		"a float":         func(u map[string]any) { u["spec"].(map[string]any)["n"] = float64(1) },
		"a string":        func(u map[string]any) { u["spec"].(map[string]any)["n"] = "1" },
		"a list item":     func(u map[string]any) { u["spec"].(map[string]any)["l"] = []any{"x", true} },
		"strings regroup": func(u map[string]any) {
			u["spec"].(map[string]any)["s"] = "a"
			u["spec"].(map[string]any)["l"] = []any{"xb", true, nil}
		},
		"a key":            func(u map[string]any) { u["spec"].(map[string]any)["m"] = nil },
		"top-level status": func(u map[string]any) { u["status"] = map[string]any{} },
	} {
		u := base()
		change(u)
		if key(u) == k0 {
			t.Errorf("%s: same key", name)
		}
	}
	if _, ok := contentKey(map[string]any{"spec": map[string]string{"a": "b"}}); ok {
		t.Error("a key for a value JSON decoding never gives")
	}
}
