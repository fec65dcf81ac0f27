package crdgen

import (
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// Values are written with their types where an interface holds them,
// empty-but-set slices stay set, pointers to scalars go through ptr.To, and
// an equal subtree is built once and shared.
func TestExpr(t *testing.T) {
	g := &gen{imports: map[string]string{}, vars: map[string]string{}}
	reason := apiextensionsv1.FieldValueErrorReason("FieldValueForbidden")
	leaf := structuralschema.Structural{Generic: structuralschema.Generic{Type: "string", Default: structuralschema.JSON{Object: map[string]any{"n": int64(3), "f": 0.5, "s": "x", "b": true, "l": []any{nil}}}}}
	s := &structuralschema.Structural{
		Generic:    structuralschema.Generic{Type: "object"},
		Properties: map[string]structuralschema.Structural{"a": leaf, "b": leaf},
		Items:      &leaf,
		Extensions: structuralschema.Extensions{XListType: new(string), XListMapKeys: []string{}},
		ValidationExtensions: structuralschema.ValidationExtensions{XValidations: apiextensionsv1.ValidationRules{
			{Rule: "self.a == 'x'", Reason: &reason},
		}},
	}
	x, err := g.expr(reflect.ValueOf(s), false)
	if err != nil {
		t.Fatal(err)
	}
	if x != "&s2" || len(g.stmts) != 2 {
		t.Fatalf("expr %q with %d statements, want &s2 after s1 (the leaf, once):\n%s", x, len(g.stmts), strings.Join(g.stmts, "\n"))
	}
	src := strings.Join(g.stmts, "\n")
	for _, want := range []string{
		`"f": float64(0.5)`, `"n": int64(3)`, `"s": "x"`, `"b": bool(true)`, `"l": []any{nil}`,
		`"a": s1`, `"b": s1`, `Items: &s1`,
		`XListMapKeys: []string{}`, `XListType: ptr.To("")`,
		`Reason: ptr.To(apiextensionsv1.FieldValueErrorReason("FieldValueForbidden"))`,
	} {
		if !strings.Contains(src, want) {
			t.Errorf("no %s in\n%s", want, src)
		}
	}
}

// DropDocs clears descriptions everywhere, map values included, and
// nothing else.
func TestDropDocs(t *testing.T) {
	s := &structuralschema.Structural{
		Generic: structuralschema.Generic{Type: "object", Description: "top"},
		Properties: map[string]structuralschema.Structural{
			"description": {Generic: structuralschema.Generic{Type: "string", Description: "a field named description"}},
		},
	}
	DropDocs(s)
	if s.Description != "" || s.Properties["description"].Description != "" {
		t.Errorf("descriptions left: %+v", s)
	}
	if s.Type != "object" || s.Properties["description"].Type != "string" {
		t.Errorf("more than docs dropped: %+v", s)
	}
}
