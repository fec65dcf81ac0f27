package render

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// policyObject is one object a policy in policies/ renders to: what to
// call it in a failure, the object, and toUnstructured's map of it.
type policyObject struct {
	what string
	obj  Object
	u    map[string]any
}

// sizedPolicy is a policy of policies/ with its locks sized
// (admission.SizeLocks), as render generates from it.
type sizedPolicy struct {
	dir   string
	p     *policy.Policy
	sizes []admission.LockSize
}

// sizedPolicies loads every policy in policies/ (at least one).
func sizedPolicies(t *testing.T) []sizedPolicy {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("..", "policies", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no policies: %v", err)
	}
	var out []sizedPolicy
	for _, dir := range dirs {
		p, err := policy.Load(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		p, sizes, err := admission.SizeLocks(p)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		out = append(out, sizedPolicy{dir, p, sizes})
	}
	return out
}

// policiesObjects returns every object the policies in policies/ render
// to (at least 20: the lab's and the department's).
func policiesObjects(t *testing.T) []policyObject {
	t.Helper()
	var out []policyObject
	for _, sp := range sizedPolicies(t) {
		dir, p, sizes := sp.dir, sp.p, sp.sizes
		for _, o := range generate(p, sizes) {
			u, err := toUnstructured(o.Obj)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, policyObject{what: dir + ": " + objectID(o.Kind, o.Namespace, o.Name), obj: o, u: u.Object})
		}
	}
	if len(out) < 20 {
		t.Fatalf("%d objects, want the policies' renders", len(out))
	}
	return out
}

// TestToUnstructuredIsJSONRoundTrip: toUnstructured (apimachinery's
// reflection converter, or the JSON round trip for Argo's types), and the
// converter for every kind, give every object of the policies in policies/
// exactly the map the API server's JSON decoding gives it (encoding/json,
// then k8s.io/apimachinery/pkg/util/json: numbers int64), which render
// wrote its YAML from and crdcheck validates.
func TestToUnstructuredIsJSONRoundTrip(t *testing.T) {
	for _, o := range policiesObjects(t) {
		b, err := json.Marshal(o.obj.Obj)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{}
		if err := utiljson.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		trimEncoded(want)
		if !reflect.DeepEqual(o.u, want) {
			t.Errorf("%s: toUnstructured gives\n%#v\nthe JSON round trip\n%#v", o.what, o.u, want)
		}
		// Both of toUnstructured's ways give it: the converter too (the
		// WorkflowTemplates take the JSON way itself).
		conv, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o.obj.Obj)
		if err != nil {
			t.Fatal(err)
		}
		trimEncoded(conv)
		if !reflect.DeepEqual(conv, want) {
			t.Errorf("%s: the converter gives\n%#v\nthe JSON round trip\n%#v", o.what, conv, want)
		}
	}
}

// TestGenerateIdentities: what Check generates (identities only for the
// admission policies) names the same objects, in the same order, from the
// same policy fields, as what render writes, and leaves only the
// ValidatingAdmissionPolicies without their spec.
func TestGenerateIdentities(t *testing.T) {
	for _, sp := range sizedPolicies(t) {
		dir, p, sizes := sp.dir, sp.p, sp.sizes
		full, ids := generateObjects(p, sizes, false), generateObjects(p, sizes, true)
		if len(full) != len(ids) {
			t.Fatalf("%s: %d objects, identities %d", dir, len(full), len(ids))
		}
		stubs := 0
		for i := range full {
			f, d := full[i], ids[i]
			if f.APIVersion != d.APIVersion || f.Kind != d.Kind || f.Namespace != d.Namespace || f.Name != d.Name || !reflect.DeepEqual(f.source, d.source) {
				t.Errorf("%s: object %d is %s %s/%s from %v, identities give %s %s/%s from %v", dir, i,
					f.Kind, f.Namespace, f.Name, f.source, d.Kind, d.Namespace, d.Name, d.source)
			}
			if reflect.DeepEqual(f.Obj, d.Obj) {
				continue
			}
			if d.Kind != "ValidatingAdmissionPolicy" {
				t.Errorf("%s: %s %s differs in its body", dir, d.Kind, d.Name)
			}
			stubs++
		}
		if stubs == 0 || stubs != len(p.GPUNamespaces()) {
			t.Errorf("%s: %d admission policies without a spec, want one per GPU namespace (%d)", dir, stubs, len(p.GPUNamespaces()))
		}
	}
}

// TestRenderedKindsListed: every kind the policies in policies/ render to
// is in contract.RenderedKinds, which reconcile prunes and drift --live
// reads even when a render has none of the kind; and each listed kind is
// one a policy here renders (policies/department declares Cohorts).
func TestRenderedKindsListed(t *testing.T) {
	listed := map[schema.GroupVersionKind]bool{}
	for _, gvk := range contract.RenderedKinds {
		listed[gvk] = true
	}
	seen := map[schema.GroupVersionKind]bool{}
	for _, o := range policiesObjects(t) {
		gvk := schema.FromAPIVersionAndKind(o.obj.APIVersion, o.obj.Kind)
		seen[gvk] = true
		if !listed[gvk] {
			t.Errorf("%s: kind %s is not in contract.RenderedKinds", o.what, gvk)
		}
	}
	for gvk := range listed {
		if !seen[gvk] {
			t.Errorf("contract.RenderedKinds lists %s, which no policy in policies/ renders", gvk)
		}
	}
}
