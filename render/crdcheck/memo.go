package crdcheck

import (
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The OpenAPI schema check (validation.ValidateCustomResource) is most of
// a validation's cost: kube-openapi builds a validator for every field of
// every object. It is a function of the object's value and nothing else,
// and where a CRD's schema says of metadata only that it is an object
// (`metadata: {type: object}`, as in every CRD crdcheck embeds: the API
// server checks metadata itself, schemaobjectmeta here), it reads nothing
// of metadata but that it is a map. So objects of one kind that are equal
// but for their metadata get equal errors, and openapiMemo computes them
// once: in a 1,000-queue policy the ClusterQueues of one cohort differ in
// their names only. The other checks (metadata, list types, CEL rules,
// which can read metadata.name) still run for every object.
type openapiMemo struct {
	// enabled is whether the schema's metadata is exactly {type: object}
	// (metadataIsAnyObject).
	enabled bool
	mu      sync.Mutex
	errs    map[string]field.ErrorList
}

// metadataIsAnyObject reports whether the root schema's metadata property
// is exactly {type: object}: no properties, limits or other keywords.
func metadataIsAnyObject(root *spec.Schema) bool {
	m, ok := root.Properties["metadata"]
	return ok && reflect.DeepEqual(m, spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}})
}

// openapiErrors is validation.ValidateCustomResource of u against the
// version's OpenAPI schema, computed once per distinct content (contentKey)
// when the memo is enabled.
func (cv *crdVersion) openapiErrors(u map[string]any) field.ErrorList {
	if !cv.memo.enabled {
		return cv.openapiErrorsUncached(u)
	}
	key, ok := contentKey(u)
	if !ok {
		return cv.openapiErrorsUncached(u)
	}
	cv.memo.mu.Lock()
	errs, seen := cv.memo.errs[key]
	cv.memo.mu.Unlock()
	if seen {
		return errs
	}
	errs = cv.openapiErrorsUncached(u)
	cv.memo.mu.Lock()
	if cv.memo.errs == nil {
		cv.memo.errs = map[string]field.ErrorList{}
	}
	cv.memo.errs[key] = errs
	cv.memo.mu.Unlock()
	return errs
}

// openapiErrorsUncached is the check itself.
func (cv *crdVersion) openapiErrorsUncached(u map[string]any) field.ErrorList {
	return apiservervalidation.ValidateCustomResource(nil, u, cv.openapi)
}

// contentKey encodes u without its metadata's content (only whether it
// has metadata, and whether that is a map) so that two objects get equal
// keys exactly when they are equal but for their metadata: every value is
// tagged with its type (an int64 1 and a float64 1 differ), strings and
// collections with their lengths, map keys sorted. False for a value that
// is not JSON-decoded (crdcheck then validates the object as it is).
func contentKey(u map[string]any) (string, bool) {
	var b strings.Builder
	md, has := u["metadata"]
	_, isMap := md.(map[string]any)
	switch {
	case isMap:
		b.WriteString("M")
	case has:
		b.WriteString("m")
	default:
		b.WriteString("-")
	}
	rest := make(map[string]any, len(u))
	for k, v := range u {
		if k != "metadata" {
			rest[k] = v
		}
	}
	if !writeKey(&b, rest) {
		return "", false
	}
	return b.String(), true
}

func writeKey(b *strings.Builder, v any) bool {
	switch v := v.(type) {
	case nil:
		b.WriteByte('n')
	case bool:
		if v {
			b.WriteByte('t')
		} else {
			b.WriteByte('f')
		}
	case int64:
		b.WriteByte('i')
		b.WriteString(strconv.FormatInt(v, 10))
		b.WriteByte(';')
	case float64:
		b.WriteByte('d')
		b.WriteString(strconv.FormatUint(math.Float64bits(v), 16))
		b.WriteByte(';')
	case string:
		b.WriteByte('s')
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	case []any:
		b.WriteByte('l')
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte('[')
		for _, e := range v {
			if !writeKey(b, e) {
				return false
			}
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('o')
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte('{')
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b.WriteString(strconv.Itoa(len(k)))
			b.WriteByte(':')
			b.WriteString(k)
			if !writeKey(b, v[k]) {
				return false
			}
		}
		b.WriteByte('}')
	default:
		return false
	}
	return true
}
