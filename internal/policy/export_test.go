package policy

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"cuelang.org/go/cue"
)

// LoadFilesChecked is LoadFiles without its fast path (evalChecked): the
// checked path alone, which evalChecked must agree with.
func LoadFilesChecked(files map[string][]byte, display func(string) string) (*Policy, error) {
	return loadFiles(files, display, false)
}

// EvalChecked reports whether LoadFiles' fast path answers for files.
func EvalChecked(files map[string][]byte) bool {
	files = normalizeLineEndings(files)
	fsys, fromFS, err := policyFS(files, func(n string) string { return n })
	if err != nil {
		return false
	}
	_, _, ok := evalChecked(fsys, fromFS, files)
	return ok
}

// SameLoad says how two loads of one policy differ: the model, and the
// position of every field of the policy (Pos), walked down to its leaves;
// "" when they do not.
func SameLoad(a, b *Policy) string {
	ma, mb := *a, *b
	ma.src, mb.src = nil, nil
	// GPUMemoryForms is gathered from maps, in no order (UnitsMixed sorts).
	byPath := func(x, y QuantityForm) int { return strings.Compare(PathString(x.Path...), PathString(y.Path...)) }
	ma.GPUMemoryForms = slices.SortedFunc(slices.Values(ma.GPUMemoryForms), byPath)
	mb.GPUMemoryForms = slices.SortedFunc(slices.Values(mb.GPUMemoryForms), byPath)
	if !reflect.DeepEqual(ma, mb) {
		return fmt.Sprintf("models differ:\n%+v\n--- and ---\n%+v", ma, mb)
	}
	if a.src.fallback != b.src.fallback {
		return fmt.Sprintf("fallback positions differ: %s and %s", a.src.fallback, b.src.fallback)
	}
	var walk func(v cue.Value, path []string) string
	walk = func(v cue.Value, path []string) string {
		if len(path) > 0 {
			if pa, pb := a.Pos(path...), b.Pos(path...); pa != pb {
				return fmt.Sprintf("%s: position %s and %s", PathString(path...), pa, pb)
			}
		}
		switch v.Kind() {
		case cue.StructKind:
			it, err := v.Fields()
			if err != nil {
				return err.Error()
			}
			for it.Next() {
				if d := walk(it.Value(), append(path[:len(path):len(path)], it.Selector().Unquoted())); d != "" {
					return d
				}
			}
		case cue.ListKind:
			it, err := v.List()
			if err != nil {
				return err.Error()
			}
			for i := 0; it.Next(); i++ {
				if d := walk(it.Value(), append(path[:len(path):len(path)], fmt.Sprint(i))); d != "" {
					return d
				}
			}
		}
		return ""
	}
	return walk(a.src.value(), nil)
}
