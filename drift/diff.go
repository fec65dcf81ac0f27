package drift

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
)

// Change is the kind of a difference, read from the older side (the pin,
// the base) to the newer (HEAD, the head).
type Change string

const (
	// Added: only the newer side has the object (it is missing at the pin).
	Added Change = "added"
	// Removed: only the older side has the object (it is extra at the pin).
	Removed Change = "removed"
	// Changed: a field differs.
	Changed Change = "changed"
)

// Difference is one semantic difference between two renders.
type Difference struct {
	Change    Change `json:"change"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// File is the object's file in the render (the newer side's when it has
	// the object).
	File string `json:"file"`
	// Path is the field, e.g.
	// spec.templates[gpu-step].container.resources.requests["gpupolicy.dev/gpu-memory"];
	// empty for an added or removed object.
	Path string `json:"path,omitempty"`
	// From and To are the values on the older and newer sides: a scalar as
	// is, a map or list as compact JSON; empty when absent (an empty string
	// shows as "").
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Consequence says what the difference does, in the lab's words, where
	// the model knows it.
	Consequence string `json:"consequence,omitempty"`
	// Introduced is the commit that brought the newer side's value (git
	// side only; nil when unknown).
	Introduced *gitrepo.Commit `json:"introduced,omitempty"`

	// keys is the path as lookup keys, for explanations.
	keys []any
	// from and to are the raw values.
	from, to any
	hasFrom  bool
	hasTo    bool
}

// Object names the differing object.
func (d Difference) Object() string { return Ref(d.Kind, d.Namespace, d.Name) }

// Compare returns the differences between two renders, older first:
// objects only in to (Added), only in from (Removed), and for objects in
// both one Changed difference per differing field, sorted by object and
// path. metadata is compared on labels and annotations only; status is
// ignored.
func Compare(from, to Set) []Difference {
	var out []Difference
	refs := map[string]bool{}
	for r := range from {
		refs[r] = true
	}
	for r := range to {
		refs[r] = true
	}
	for r := range refs {
		f, t := from[r], to[r]
		switch {
		case f == nil:
			out = append(out, Difference{Change: Added, Kind: t.Kind, Namespace: t.Namespace, Name: t.Name, File: t.File})
		case t == nil:
			out = append(out, Difference{Change: Removed, Kind: f.Kind, Namespace: f.Namespace, Name: f.Name, File: f.File})
		default:
			for _, d := range Fields(f.Body, t.Body) {
				d.Kind, d.Namespace, d.Name, d.File = t.Kind, t.Namespace, t.Name, t.File
				out = append(out, d)
			}
		}
	}
	sortDifferences(out)
	return out
}

func sortDifferences(ds []Difference) {
	// Keys are built once, not per comparison: a live cluster can hold
	// tens of thousands of differences (owned objects the render lacks).
	type key struct {
		rank         int
		object, path string
	}
	keys := make([]key, len(ds))
	idx := make([]int, len(ds))
	for i := range ds {
		keys[i] = key{kindRank(ds[i].Kind), ds[i].Object(), ds[i].Path}
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ka, kb := keys[idx[a]], keys[idx[b]]
		if ka.rank != kb.rank {
			return ka.rank < kb.rank
		}
		if ka.object != kb.object {
			return ka.object < kb.object
		}
		return ka.path < kb.path
	})
	sorted := make([]Difference, len(ds))
	for i, j := range idx {
		sorted[i] = ds[j]
	}
	copy(ds, sorted)
}

// kindRank orders kinds the way a reader of the lab thinks of them: what
// jobs run through first, then the queues, then the rest.
func kindRank(kind string) int {
	for i, k := range []string{"WorkflowTemplate", "ConfigMap", "ClusterQueue", "Cohort", "LocalQueue", "WorkloadPriorityClass", "ResourceFlavor", "LimitRange", "Namespace"} {
		if k == kind {
			return i
		}
	}
	return 100
}

// Fields compares two objects and returns one Changed difference per
// differing field (Kind and names left empty).
func Fields(from, to map[string]any) []Difference {
	var out []Difference
	keys := unionKeys(from, to)
	for _, k := range keys {
		switch k {
		case "status":
			continue
		case "metadata":
			fm, _ := from[k].(map[string]any)
			tm, _ := to[k].(map[string]any)
			for _, mk := range []string{"labels", "annotations"} {
				walk(&out, "metadata."+mk, []any{"metadata", mk}, fm[mk], tm[mk], has(fm, mk), has(tm, mk))
			}
			continue
		}
		walk(&out, k, []any{k}, from[k], to[k], has(from, k), has(to, k))
	}
	return out
}

func has(m map[string]any, k string) bool {
	if m == nil {
		return false
	}
	_, ok := m[k]
	return ok
}

func walk(out *[]Difference, path string, keys []any, f, t any, hasF, hasT bool) {
	add := func() {
		*out = append(*out, Difference{Change: Changed, Path: path, keys: append([]any(nil), keys...),
			from: f, to: t, hasFrom: hasF, hasTo: hasT, From: show(f, hasF), To: show(t, hasT)})
	}
	if !hasF && !hasT {
		return
	}
	if !hasF || !hasT {
		// {} or [] against absent mean the same to the API server.
		if isEmpty(f) && isEmpty(t) {
			return
		}
		add()
		return
	}
	switch fv := f.(type) {
	case map[string]any:
		tv, ok := t.(map[string]any)
		if !ok {
			add()
			return
		}
		for _, k := range unionKeys(fv, tv) {
			walk(out, path+field(k), append(keys, k), fv[k], tv[k], has(fv, k), has(tv, k))
		}
	case []any:
		tv, ok := t.([]any)
		if !ok {
			add()
			return
		}
		if named(fv) && named(tv) {
			fm, tm := map[string]any{}, map[string]any{}
			var order []string
			for _, it := range fv {
				fm[ItemName(it)] = it
				order = append(order, ItemName(it))
			}
			for _, it := range tv {
				n := ItemName(it)
				if _, ok := fm[n]; !ok {
					order = append(order, n)
				}
				tm[n] = it
			}
			for _, n := range order {
				_, hf := fm[n]
				_, ht := tm[n]
				walk(out, path+"["+n+"]", append(keys, n), fm[n], tm[n], hf, ht)
			}
			return
		}
		if len(fv) != len(tv) || !allMaps(fv) {
			if !equal(f, t) {
				add()
			}
			return
		}
		for i := range fv {
			walk(out, fmt.Sprintf("%s[%d]", path, i), append(keys, i), fv[i], tv[i], true, true)
		}
	default:
		if !scalarEqual(f, t) {
			add()
		}
	}
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

func allMaps(items []any) bool {
	for _, it := range items {
		if _, ok := it.(map[string]any); !ok {
			return false
		}
	}
	return true
}

// equal compares two values deeply, leaves by scalarEqual.
func equal(f, t any) bool {
	switch fv := f.(type) {
	case map[string]any:
		tv, ok := t.(map[string]any)
		if !ok || len(fv) != len(tv) {
			return false
		}
		for k, x := range fv {
			y, ok := tv[k]
			if !ok || !equal(x, y) {
				return false
			}
		}
		return true
	case []any:
		tv, ok := t.([]any)
		if !ok || len(fv) != len(tv) {
			return false
		}
		for i := range fv {
			if !equal(fv[i], tv[i]) {
				return false
			}
		}
		return true
	default:
		switch t.(type) {
		case map[string]any, []any:
			return false
		}
		return scalarEqual(f, t)
	}
}

// field renders a map key as a path element: .name, or ["nvidia.com/gpu"]
// for a key that is not a plain word.
func field(k string) string {
	if k == "" || strings.ContainsAny(k, "./[]\" ") {
		return fmt.Sprintf("[%q]", k)
	}
	return "." + k
}

// named reports whether every item is a map with a distinct, non-empty name.
func named(items []any) bool {
	if len(items) == 0 {
		return false
	}
	seen := map[string]bool{}
	for _, it := range items {
		n := ItemName(it)
		if n == "" || seen[n] {
			return false
		}
		seen[n] = true
	}
	return true
}

// ItemName is the name of a list item that is a map with a string "name"
// (containers, flavors, resources, parameters), "" otherwise.
func ItemName(it any) string {
	m, ok := it.(map[string]any)
	if !ok {
		return ""
	}
	n, _ := m["name"].(string)
	return n
}

// scalarEqual compares leaves: equal string forms, or equal Kubernetes
// quantities ("1Gi" and "1024Mi", 4 and "4").
func scalarEqual(f, t any) bool {
	if f == nil || t == nil {
		return f == nil && t == nil
	}
	fs, ts := fmt.Sprint(f), fmt.Sprint(t)
	if fs == ts {
		return true
	}
	_, fb := f.(bool)
	_, tb := t.(bool)
	if fb || tb {
		return false
	}
	fq, err1 := resource.ParseQuantity(fs)
	tq, err2 := resource.ParseQuantity(ts)
	return err1 == nil && err2 == nil && fq.Cmp(tq) == 0
}

// show renders a value for a report: a scalar as is (an empty string as
// "", a multi-line string holding YAML as compact JSON), a map or list as
// compact JSON, cut at 160 characters; "" when absent.
func show(v any, present bool) string {
	if !present {
		return ""
	}
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if x == "" {
			return `""`
		}
		if strings.Contains(strings.TrimRight(x, "\n"), "\n") {
			var y any
			if err := yaml.Unmarshal([]byte(x), &y); err == nil {
				switch y.(type) {
				case map[string]any, []any:
					return cut(compactJSON(y), 160)
				}
			}
			return cut(strconv.Quote(x), 160)
		}
		return x
	case map[string]any, []any:
		return cut(compactJSON(x), 160)
	default:
		return fmt.Sprint(x)
	}
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// cut shortens s to at most n bytes, ending in "...".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func unionKeys(a, b map[string]any) []string {
	set := map[string]bool{}
	for k := range a {
		set[k] = true
	}
	for k := range b {
		set[k] = true
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
