package crdcheck

import (
	"context"
	"math"
	"reflect"
	"slices"
	"strconv"
	"sync"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The checks of an object's content are most of a validation's cost:
// kube-openapi builds a validator for every field of every object, and the
// CEL rules convert and walk the whole object. Where a CRD's schema says of
// metadata only that it is an object (`metadata: {type: object}`, as in
// every Kueue and Argo CRD crdcheck embeds: the API server checks metadata
// itself, validateMeta here), each of the following reads nothing of the
// object's metadata but whether it is there and a map, so objects of one
// kind that are equal but for their metadata get equal errors from it:
//
//   - the OpenAPI schema (validation.ValidateCustomResource): the
//     metadata property's schema has no keyword to check but its type;
//   - the embedded ObjectMeta check (objectmeta.Validate with
//     isResourceRoot false): its validate checks apiVersion, kind and
//     metadata (validateEmbeddedResource) only at a node marked
//     x-kubernetes-embedded-resource, which the root is not here, and
//     descends into metadata only through its properties or additional
//     properties, of which {type: object} has none;
//   - the list types (listtype.ValidateListSetsAndMaps): it descends into
//     metadata the same way and checks only nodes with
//     x-kubernetes-list-type;
//   - which CEL rules can fail the object (celFor: reachRules finds no rule
//     in metadata) and their errors (cel's Validator.validateExpressions):
//     a rule's `self` is the value at its own node, so only a rule at the
//     root sees metadata (model.WithTypeAndObjectMeta gives it
//     metadata.name and generateName); validateMap descends into metadata
//     only through a validator built for a node with rules (validator),
//     and {type: object} has none; the cost budget is spent on the rules
//     that run, so on the content alone. The CEL errors are shared only
//     when the root carries no rule that runs on create (createRules of
//     the root) and no rule is nested in allOf/anyOf/oneOf/not
//     (hasNestedRules).
//
// So do the API server's steps before them, which read no metadata either
// where metadata is {type: object}: pruning (pruning.PruneWithOptions, with
// isResourceRoot: its prune skips apiVersion, kind and metadata at an
// embedded-resource node, which the root is made) and defaulting
// (defaulting.Default sets the defaults of properties, and {type: object}
// has neither a default nor properties). Their result, the pruned and
// defaulted content, is a function of the content they are given.
//
// contentMemo computes all of this once per distinct content of a kind
// (contentKey of the object as given, before pruning): in a 1,000-queue
// policy the ClusterQueues of one cohort differ in their names only. What
// stays per object is what reads the metadata: validateMeta (name,
// namespace), and whether the CEL rules run, since an object's own errors
// (a required name missing) can block them (blocking). The CEL errors of a
// content are computed on the first object of it that runs them.
type contentMemo struct {
	// enabled is whether the schema's metadata is exactly {type: object},
	// in the OpenAPI schema (metadataIsAnyObject) and the structural one
	// (structuralMetadataIsAnyObject).
	enabled bool
	// cel is whether the CEL errors are shared too: enabled, and no rule
	// at the root or nested in allOf/anyOf/oneOf/not.
	cel bool
	mu  sync.Mutex
	by  map[string]*contentResult
}

// contentResult is what the checks of one content found.
type contentResult struct {
	// fields are the errors of pruning (unknown fields), the OpenAPI
	// schema, the embedded ObjectMeta and the list types, in that order,
	// as the object's Error gives them (asFields).
	fields []FieldError
	// blocking is whether one of them keeps the CEL rules from running
	// (blocking).
	blocking bool

	// shared is whether the CEL rules' errors are shared by the objects of
	// this content (contentMemo.cel): cel, once celOnce has run.
	shared  bool
	celOnce sync.Once
	cel     []FieldError
}

// metadataIsAnyObject reports whether the root schema's metadata property
// is exactly {type: object}: no properties, limits or other keywords.
func metadataIsAnyObject(root *spec.Schema) bool {
	m, ok := root.Properties["metadata"]
	return ok && reflect.DeepEqual(m, spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}})
}

// structuralMetadataIsAnyObject reports whether the structural schema's
// metadata property is exactly {type: object} (an empty value validation
// is none), with no x-kubernetes extension, and the root is neither an
// embedded resource nor has additional properties (through which the
// checks would reach metadata too).
func structuralMetadataIsAnyObject(root *structuralschema.Structural) bool {
	m, ok := root.Properties["metadata"]
	if !ok || root.XEmbeddedResource || root.AdditionalProperties != nil {
		return false
	}
	if m.ValueValidation != nil && reflect.DeepEqual(*m.ValueValidation, structuralschema.ValueValidation{}) {
		m.ValueValidation = nil
	}
	return reflect.DeepEqual(m, structuralschema.Structural{Generic: structuralschema.Generic{Type: "object"}})
}

// contentChecks checks u's content (see contentMemo): it prunes u and sets
// its defaults (prepare), then checks the OpenAPI schema, the embedded
// ObjectMeta and the list types. When the memo is enabled a content is
// checked once (contentKey of u as given): an object equal to one checked
// before but for its metadata gets that one's result, and u is left as it
// is. prepared is whether u was pruned and defaulted.
func (cv *crdVersion) contentChecks(u map[string]any) (r *contentResult, prepared bool) {
	if !cv.memo.enabled {
		return cv.contentChecksUncached(u, false), true
	}
	buf := keyBuffers.Get().(*[]byte)
	defer keyBuffers.Put(buf)
	key, ok := appendContentKey((*buf)[:0], u)
	*buf = key
	if !ok {
		return cv.contentChecksUncached(u, false), true
	}
	cv.memo.mu.Lock()
	r, seen := cv.memo.by[string(key)] // no copy of key to look it up
	cv.memo.mu.Unlock()
	if seen {
		return r, false
	}
	r = cv.contentChecksUncached(u, cv.memo.cel)
	cv.memo.mu.Lock()
	if prev, ok := cv.memo.by[string(key)]; ok {
		r = prev // another goroutine's, equal
	} else {
		if cv.memo.by == nil {
			cv.memo.by = map[string]*contentResult{}
		}
		cv.memo.by[string(key)] = r
	}
	cv.memo.mu.Unlock()
	return r, true
}

// keyBuffers hold contentKey encodings while they are looked up.
var keyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// contentChecksUncached prepares u and runs the checks themselves:
// pruning's unknown fields, the OpenAPI schema
// (validation.ValidateCustomResource), the embedded ObjectMeta
// (objectmeta.Validate) and the list types
// (listtype.ValidateListSetsAndMaps).
func (cv *crdVersion) contentChecksUncached(u map[string]any, shared bool) *contentResult {
	errs := cv.prepare(u)
	errs = append(errs, cv.openapiErrors(u)...)
	errs = append(errs, schemaobjectmeta.Validate(context.Background(), nil, u, cv.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, cv.structural, u)...)
	return &contentResult{fields: asFields(errs), blocking: blocking(errs), shared: shared}
}

// openapiErrors is validation.ValidateCustomResource of u against the
// version's OpenAPI schema.
func (cv *crdVersion) openapiErrors(u map[string]any) field.ErrorList {
	return apiservervalidation.ValidateCustomResource(nil, u, cv.openapi)
}

// celErrors returns the errors of the CRD's CEL rules for u, whose content
// checks gave r (prepared: whether u is pruned and defaulted yet): those
// that can fail it (celFor), run as the API server runs them on create
// (Validator.Validate, no old object, the runtime cost budget). When r is
// shared they are computed once, on the first object that asks.
func (cv *crdVersion) celErrors(r *contentResult, u map[string]any, prepared bool) []FieldError {
	run := func() []FieldError {
		if !prepared {
			cv.prepare(u)
		}
		celv := cv.celFor(u)
		if celv == nil {
			return nil
		}
		errs, _ := celv.Validate(context.Background(), nil, cv.structural, u, nil, celconfig.RuntimeCELCostBudget)
		return asFields(errs)
	}
	if !r.shared {
		return run()
	}
	r.celOnce.Do(func() { r.cel = run() })
	return r.cel
}

// asFields are errs as an Error lists them: the field's path ("(object)"
// for the root) and the error's text without it.
func asFields(errs field.ErrorList) []FieldError {
	if len(errs) == 0 {
		return nil
	}
	out := make([]FieldError, len(errs))
	for i, fe := range errs {
		out[i] = FieldError{Field: fe.Field, Message: fe.ErrorBody()}
		if out[i].Field == "" || out[i].Field == "<nil>" {
			out[i].Field = "(object)"
		}
	}
	return out
}

// contentKey encodes u without its metadata's content (only whether it
// has metadata, and whether that is a map) so that two objects get equal
// keys exactly when they are equal but for their metadata: every value is
// tagged with its type (an int64 1 and a float64 1 differ), strings and
// collections with their lengths, map keys sorted. False for a value that
// is not JSON-decoded (crdcheck then validates the object as it is).
func contentKey(u map[string]any) (string, bool) {
	b, ok := appendContentKey(nil, u)
	return string(b), ok
}

// appendContentKey appends contentKey's encoding of u to b.
func appendContentKey(b []byte, u map[string]any) ([]byte, bool) {
	md, has := u["metadata"]
	_, isMap := md.(map[string]any)
	switch {
	case isMap:
		b = append(b, 'M')
	case has:
		// Not a map: the OpenAPI check's error names its type, so the
		// value itself is part of the content.
		b = append(b, 'm')
		var ok bool
		if b, ok = appendKey(b, md); !ok {
			return nil, false
		}
	default:
		b = append(b, '-')
	}
	// u as a map without metadata.
	keys := make([]string, 0, len(u))
	for k := range u {
		if k != "metadata" {
			keys = append(keys, k)
		}
	}
	return appendMapKey(b, u, keys)
}

// appendMapKey appends the encoding of the map m restricted to keys.
func appendMapKey(b []byte, m map[string]any, keys []string) ([]byte, bool) {
	slices.Sort(keys)
	b = append(b, 'o')
	b = strconv.AppendInt(b, int64(len(keys)), 10)
	b = append(b, '{')
	for _, k := range keys {
		b = strconv.AppendInt(b, int64(len(k)), 10)
		b = append(b, ':')
		b = append(b, k...)
		var ok bool
		if b, ok = appendKey(b, m[k]); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func appendKey(b []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		b = append(b, 'n')
	case bool:
		if v {
			b = append(b, 't')
		} else {
			b = append(b, 'f')
		}
	case int64:
		b = append(b, 'i')
		b = strconv.AppendInt(b, v, 10)
		b = append(b, ';')
	case float64:
		b = append(b, 'd')
		b = strconv.AppendUint(b, math.Float64bits(v), 16)
		b = append(b, ';')
	case string:
		b = append(b, 's')
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	case []any:
		b = append(b, 'l')
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, '[')
		for _, e := range v {
			var ok bool
			if b, ok = appendKey(b, e); !ok {
				return b, false
			}
		}
		b = append(b, ']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		return appendMapKey(b, v, keys)
	default:
		return b, false
	}
	return b, true
}
