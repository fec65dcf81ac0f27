package render

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// policyObject is one object a policy in policies/ renders to: what to
// call it in a failure, the object, and toUnstructured's map of it.
type policyObject struct {
	what string
	obj  Object
	u    map[string]any
}

// policiesObjects returns every object the policies in policies/ render
// to (at least 20: the lab's and the department's).
func policiesObjects(t *testing.T) []policyObject {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("..", "policies", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no policies: %v", err)
	}
	var out []policyObject
	for _, dir := range dirs {
		p, err := policy.Load(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		p, sizes, err := admission.SizeLocks(p)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
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
// reflection converter) gives every object of the policies in policies/
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
		delete(want, "status")
		if spec, ok := want["spec"].(map[string]any); ok && len(spec) == 0 {
			delete(want, "spec")
		}
		if md, ok := want["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
			delete(md, "creationTimestamp")
		}
		if !reflect.DeepEqual(o.u, want) {
			t.Errorf("%s: toUnstructured gives\n%#v\nthe JSON round trip\n%#v", o.what, o.u, want)
		}
	}
}
