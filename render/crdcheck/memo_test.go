package crdcheck

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// TestContentMemoAppliesToEmbeddedCRDs: the memo is on, CEL errors
// included, for every embedded Kueue and Argo CRD (their schemas leave
// metadata to the API server and have no rule at the root), and only for
// a metadata schema of exactly {type: object}.
func TestContentMemoAppliesToEmbeddedCRDs(t *testing.T) {
	v := build()
	for _, gvk := range v.Kinds() {
		cv := v.byGVK[gvk]
		cv.load()
		if (gvk.Group == kueue.GroupVersion.Group || gvk.Group == "argoproj.io") && (!cv.memo.enabled || !cv.memo.cel) {
			t.Errorf("%s: memo %v, CEL shared %v; want both", gvk, cv.memo.enabled, cv.memo.cel)
		}
	}
	object := structuralschema.Generic{Type: "object"}
	for name, c := range map[string]struct {
		root structuralschema.Structural
		want bool
	}{
		"any object": {structuralschema.Structural{Properties: map[string]structuralschema.Structural{"metadata": {Generic: object}}}, true},
		"an empty value validation": {structuralschema.Structural{Properties: map[string]structuralschema.Structural{
			"metadata": {Generic: object, ValueValidation: &structuralschema.ValueValidation{}}}}, true},
		"a name limit": {structuralschema.Structural{Properties: map[string]structuralschema.Structural{"metadata": {Generic: object,
			Properties: map[string]structuralschema.Structural{"name": {ValueValidation: &structuralschema.ValueValidation{MaxLength: ptr.To[int64](3)}}}}}}, false},
		"a rule": {structuralschema.Structural{Properties: map[string]structuralschema.Structural{"metadata": {Generic: object,
			ValidationExtensions: structuralschema.ValidationExtensions{XValidations: apiextensionsv1.ValidationRules{{Rule: "true"}}}}}}, false},
		"embedded resource": {structuralschema.Structural{Properties: map[string]structuralschema.Structural{"metadata": {Generic: object,
			Extensions: structuralschema.Extensions{XEmbeddedResource: true}}}}, false},
		"root additional properties": {structuralschema.Structural{Properties: map[string]structuralschema.Structural{"metadata": {Generic: object}},
			AdditionalProperties: &structuralschema.StructuralOrBool{Bool: true}}, false},
		"no metadata": {structuralschema.Structural{}, false},
	} {
		if got := structuralMetadataIsAnyObject(&c.root); got != c.want {
			t.Errorf("%s: structuralMetadataIsAnyObject = %v, want %v", name, got, c.want)
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

// TestContentMemoGivesFreshErrors: ClusterQueues checked after one
// equal to them but for metadata get the Error a check without the memo
// gives them, from each memoized check (the OpenAPI schema, the list
// types, a CEL rule); ones that differ anywhere else (a value) get their
// own.
func TestContentMemoGivesFreshErrors(t *testing.T) {
	gvk := kueue.GroupVersion.WithKind("ClusterQueue")
	memo, fresh := build(), unmemoized() // memo: its own, not the process-wide Validator's
	cv := memo.byGVK[gvk]
	cv.load()
	if !cv.memo.enabled || !cv.memo.cel {
		t.Fatalf("ClusterQueue: memo %v, CEL shared %v; want both", cv.memo.enabled, cv.memo.cel)
	}
	set := func(u *unstructured.Unstructured, v any, path ...string) *unstructured.Unstructured {
		if err := unstructured.SetNestedField(u.Object, v, path...); err != nil {
			t.Fatal(err)
		}
		return u
	}
	good := func(name string) *unstructured.Unstructured { return clusterQueue(name).cohort("gpu").obj(t) }
	openapi := func(name string) *unstructured.Unstructured {
		return set(good(name), int64(7), "spec", "queueingStrategy")
	}
	float := func(name string) *unstructured.Unstructured {
		return set(good(name), 7.5, "spec", "queueingStrategy")
	}
	celRule := func(name string) *unstructured.Unstructured { return clusterQueue(name).borrowing(1).obj(t) }
	listType := func(name string) *unstructured.Unstructured {
		u := clusterQueue(name).cohort("gpu").borrowing(1).obj(t)
		groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "resourceGroups")
		flavors := groups[0].(map[string]any)["flavors"].([]any)
		groups[0].(map[string]any)["flavors"] = append(flavors, runtime.DeepCopyJSONValue(flavors[0]))
		return set(u, groups, "spec", "resourceGroups")
	}
	want := map[string]string{ // a field of each content's errors
		"openapi": "spec.queueingStrategy", "float": "spec.queueingStrategy",
		"cel": "spec", "listtype": "spec.resourceGroups[0].flavors[1]",
	}
	type object struct {
		content string
		u       *unstructured.Unstructured
	}
	var objs []object
	for _, name := range []string{"a", "b"} {
		for content, mk := range map[string]func(string) *unstructured.Unstructured{
			"good": good, "openapi": openapi, "float": float, "cel": celRule, "listtype": listType,
		} {
			u := mk(content + "-" + name)
			u.SetAnnotations(map[string]string{"x": name})
			objs = append(objs, object{content, u})
		}
	}
	for _, o := range objs {
		got, wantErr := memo.Validate(o.u), fresh.Validate(o.u)
		if a, b := fmt.Sprint(got), fmt.Sprint(wantErr); a != b {
			t.Errorf("%s: memo gives %q, a check without it %q", o.u.GetName(), a, b)
		}
		if f := want[o.content]; f == "" && got != nil || f != "" && !hasField(got, f) {
			t.Errorf("%s: %v, want an error on %q", o.u.GetName(), got, f)
		}
	}
	if n := len(cv.memo.by); n != 5 {
		t.Errorf("%d contents remembered, want 5", n)
	}
}

// unmemoized returns a Validator that checks every object on its own.
func unmemoized() *Validator {
	v := build()
	for _, cv := range v.byGVK {
		cv.load()
		cv.memo.enabled, cv.memo.cel = false, false
	}
	return v
}

// TestContentMemoMatchesUnmemoized: every CEL case (objects breaking the
// Kueue CRDs' rules, and the lab's render), checked three times under
// other names and annotations, and once without a name, gets from the
// memo the Error a check without it gives.
func TestContentMemoMatchesUnmemoized(t *testing.T) {
	memo, fresh := build(), unmemoized()
	failing := 0
	for name, obj := range celCases(t) {
		for _, rename := range []string{"", "a", "b", "c"} {
			u := obj.DeepCopy()
			if rename != "" {
				u.SetName(u.GetName() + "-" + rename)
				u.SetAnnotations(map[string]string{"copy": rename})
			} else {
				u.SetName("")
			}
			got, want := memo.Validate(u), fresh.Validate(u)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s (%q): memo gives %q, a check without it %q", name, u.GetName(), got, want)
			}
			if rename == "c" && want != nil {
				failing++
			}
		}
	}
	if failing < 7 {
		t.Errorf("only %d cases fail; the comparison proves little", failing)
	}
}

func hasField(err error, f string) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	return slices.ContainsFunc(e.Fields, func(fe FieldError) bool { return fe.Field == f })
}

// testCRD is a cluster-scoped CRD with content rules on spec (one reading
// a defaulted field), a list type, an embedded resource and, when rootRule
// is set, a rule at the root that reads metadata.name.
func testCRD(rootRule bool) *crdVersion {
	str := structuralschema.Structural{Generic: structuralschema.Generic{Type: "string"}}
	root := &structuralschema.Structural{
		Generic: structuralschema.Generic{Type: "object"},
		Properties: map[string]structuralschema.Structural{
			"apiVersion": str, "kind": str,
			"metadata": {Generic: structuralschema.Generic{Type: "object"}},
			"spec": {
				Generic: structuralschema.Generic{Type: "object"},
				Properties: map[string]structuralschema.Structural{
					"n": {Generic: structuralschema.Generic{Type: "integer"}},
					"level": {Generic: structuralschema.Generic{Type: "integer", Default: structuralschema.JSON{Object: int64(5)}},
						ValueValidation: &structuralschema.ValueValidation{Maximum: ptr.To(10.0)}},
					"tags": {Generic: structuralschema.Generic{Type: "array"}, Items: &str, Extensions: structuralschema.Extensions{XListType: ptr.To("set")}},
					"template": {Generic: structuralschema.Generic{Type: "object"},
						Extensions: structuralschema.Extensions{XEmbeddedResource: true, XPreserveUnknownFields: true}},
				},
				ValidationExtensions: structuralschema.ValidationExtensions{XValidations: apiextensionsv1.ValidationRules{
					{Rule: "self.n != 3", Message: "n must not be 3"},
					{Rule: "self.level != 5 || self.n != 4", Message: "n must not be 4 at level 5"},
				}},
			},
		},
	}
	if rootRule {
		root.XValidations = apiextensionsv1.ValidationRules{{Rule: "self.metadata.name != 'bad'", Message: "the name is bad"}}
	}
	return &crdVersion{crd: "tests.example.com", hasRules: true, build: func() (*structuralschema.Structural, *spec.Schema) {
		return root, root.ToKubeOpenAPI()
	}}
}

var testGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Test"}

func testObject(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Test",
		"metadata": map[string]any{"name": name}, "spec": runtime.DeepCopyJSON(spec),
	}}
}

// TestContentMemoEveryCheck: on a CRD with each kind of check, objects
// equal but for metadata get equal errors from pruning, the OpenAPI
// schema, the embedded ObjectMeta, the list types and a CEL rule, computed
// once.
func TestContentMemoEveryCheck(t *testing.T) {
	cv := testCRD(false)
	v := &Validator{byGVK: map[schema.GroupVersionKind]*crdVersion{testGVK: cv}}
	fresh := testCRD(false)
	fresh.load()
	fresh.memo.enabled, fresh.memo.cel = false, false
	vf := &Validator{byGVK: map[schema.GroupVersionKind]*crdVersion{testGVK: fresh}}
	content := map[string]any{
		"n":        int64(3),                                                                    // the CEL rule
		"tags":     []any{"x", "x"},                                                             // the list type
		"template": map[string]any{"apiVersion": "", "kind": "K", "metadata": map[string]any{}}, // the embedded ObjectMeta
		"extra":    "x",                                                                         // pruning
		"level":    int64(11),                                                                   // the OpenAPI schema
	}
	wantFields := []string{"spec", "spec.tags[1]", "spec.template.apiVersion", "spec.extra", "spec.level"}
	for _, name := range []string{"a", "b", "c"} {
		u := testObject(name, content)
		u.SetLabels(map[string]string{"app": name})
		got, want := v.Validate(u), vf.Validate(u)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: memo gives %q, a check without it %q", name, got, want)
		}
		for _, f := range wantFields {
			if !hasField(got, f) {
				t.Errorf("%s: %v, want an error on %s", name, got, f)
			}
		}
	}
	if !cv.memo.enabled || !cv.memo.cel || len(cv.memo.by) != 1 {
		t.Errorf("memo %v, CEL shared %v, %d contents; want both on, 1 content", cv.memo.enabled, cv.memo.cel, len(cv.memo.by))
	}
}

// TestContentMemoRootRule: a rule at the root sees metadata.name, so the
// CEL errors of a CRD with one are not shared: each object gets its own.
func TestContentMemoRootRule(t *testing.T) {
	cv := testCRD(true)
	v := &Validator{byGVK: map[schema.GroupVersionKind]*crdVersion{testGVK: cv}}
	content := map[string]any{"n": int64(1)}
	for _, names := range [][]string{{"good", "bad"}, {"bad", "good"}} {
		for _, name := range names {
			err := v.Validate(testObject(name, content))
			if got, want := hasField(err, "(object)"), name == "bad"; got != want {
				t.Errorf("%v: %s: %v; want the root rule's error: %v", names, name, err, want)
			}
		}
	}
	if !cv.memo.enabled || cv.memo.cel {
		t.Errorf("memo %v, CEL shared %v; want the memo on, CEL not shared", cv.memo.enabled, cv.memo.cel)
	}
}

// TestContentMemoOwnBlockingError: an object without a name (required,
// which blocks the CEL rules) has them skipped, while an object of the
// same content with a name gets their error, in either order.
func TestContentMemoOwnBlockingError(t *testing.T) {
	for _, names := range [][]string{{"", "q", ""}, {"q", "", "q"}} {
		v := build()
		for _, name := range names {
			e := fieldErrors(t, v.Validate(clusterQueue(name).borrowing(1).obj(t)))
			cel := hasField(e, "spec")
			if name == "" && (!e.CELSkipped || cel || !hasField(e, "metadata.name")) || name != "" && (e.CELSkipped || !cel || len(e.Fields) != 1) {
				t.Errorf("%q: name %q: CELSkipped %v, fields %+v", names, name, e.CELSkipped, e.Fields)
			}
		}
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
	// Metadata that is not a map is part of the content: the OpenAPI
	// check's error names its type.
	seen := map[string]string{}
	for name, md := range map[string]any{"a string": "x", "another string": "y", "a number": int64(5), "null": nil, "a list": []any{}} {
		u := base()
		u["metadata"] = md
		k := key(u)
		if other, dup := seen[k]; dup {
			t.Errorf("metadata %s and %s: same key", name, other)
		}
		seen[k] = name
	}
	if _, ok := contentKey(map[string]any{"spec": map[string]string{"a": "b"}}); ok {
		t.Error("a key for a value JSON decoding never gives")
	}
}

// TestContentMemoLateCELPrepares: when the first object of a content has
// its CEL rules blocked (no name), the next one, which finds the content
// checked and so is not pruned or defaulted by that, is pruned and
// defaulted before the rules run on it, as in the API server; the one
// after gets the rules' errors without either.
func TestContentMemoLateCELPrepares(t *testing.T) {
	v := &Validator{byGVK: map[schema.GroupVersionKind]*crdVersion{testGVK: testCRD(false)}}
	content := map[string]any{"n": int64(4), "extra": "x"} // level defaults to 5
	e := fieldErrors(t, v.ValidateOwned(testObject("", content)))
	if !e.CELSkipped || len(e.Fields) != 2 {
		t.Errorf("no name: CELSkipped %v, fields %+v; want the name required and spec.extra unknown, CEL skipped", e.CELSkipped, e.Fields)
	}
	for _, name := range []string{"a", "b"} {
		u := testObject(name, content)
		e = fieldErrors(t, v.ValidateOwned(u))
		if e.CELSkipped || len(e.Fields) != 2 || !hasField(e, "spec.extra") || !slices.ContainsFunc(e.Fields, func(f FieldError) bool {
			return strings.Contains(f.Message, "n must not be 4 at level 5")
		}) {
			t.Errorf("%s: CELSkipped %v, fields %+v; want spec.extra unknown and the defaulted level's rule", name, e.CELSkipped, e.Fields)
		}
		spec := u.Object["spec"].(map[string]any)
		_, extra := spec["extra"]
		if prepared := name == "a"; (spec["level"] == int64(5)) != prepared || extra == prepared {
			t.Errorf("%s: spec %v after; want it pruned and defaulted: %v", name, spec, prepared)
		}
	}
}

// TestContentMemoConcurrent: goroutines checking objects of one content
// at once, some without a name, each get their own Error (run with -race
// to check the memo's locking).
func TestContentMemoConcurrent(t *testing.T) {
	v := build()
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() {
			name := ""
			if i%2 == 1 {
				name = fmt.Sprintf("q-%d", i)
			}
			errs[i] = v.Validate(clusterQueue(name).borrowing(1).obj(t))
		})
	}
	wg.Wait()
	for i, err := range errs {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%d: %v", i, err)
		}
		if named := i%2 == 1; e.CELSkipped == named || hasField(e, "spec") != named || e.Name != map[bool]string{true: fmt.Sprintf("q-%d", i)}[named] {
			t.Errorf("%d: %s %q: CELSkipped %v, fields %+v", i, e.Kind, e.Name, e.CELSkipped, e.Fields)
		}
	}
}
