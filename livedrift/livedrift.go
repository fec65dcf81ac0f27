// Package livedrift compares a live cluster with the render it is pinned to,
// read-only (get and list only), and checks what Kueue counted for each
// Workload against what its pods declare.
//
// Normalization, so that the "out of sync with no diff" noise users report of
// Argo CD does not appear: only the fields the render sets are compared
// (defaulted and server-set fields such as metadata.uid, managedFields,
// status, or a ClusterQueue's defaulted flavorFungibility are never read);
// quantities compare by value ("1024Mi" equals "1Gi"); numbers compare with
// their string forms ("4" equals 4); lists of named items (containers,
// flavors, parameters) are matched by name, not position.
package livedrift

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Change is the kind of a live difference.
type Change string

const (
	// Missing: the pinned render has the object, the cluster does not.
	Missing Change = "missing"
	// Extra: the cluster has an object gpupolicy owns that the render lacks.
	Extra Change = "extra"
	// Changed: a field the render sets has another value live.
	Changed Change = "changed"
)

// Difference is one way the cluster differs from the pinned render.
type Difference struct {
	Change    Change `json:"change"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Path is the field, e.g. spec.resourceGroups[0].flavors[rtx-5060-ti].resources[nvidia.com/gpu].nominalQuota.
	Path string `json:"path,omitempty"`
	// Pinned and Live are the values (JSON-ish text); "" when absent.
	Pinned string `json:"pinned,omitempty"`
	Live   string `json:"live,omitempty"`
}

// Object names the object: Kind/namespace/name or Kind/name.
func (d Difference) Object() string {
	if d.Namespace != "" {
		return d.Kind + "/" + d.Namespace + "/" + d.Name
	}
	return d.Kind + "/" + d.Name
}

// Compare reads each desired object from the cluster and reports missing,
// extra and changed objects. owner selects the objects gpupolicy owns
// (reconcile's ownership labels), for finding extra ones.
func Compare(ctx context.Context, client dynamic.Interface, mapper meta.RESTMapper, desired []*unstructured.Unstructured, owner map[string]string) ([]Difference, error) {
	var out []Difference
	want := map[string]bool{}
	kinds := map[schema.GroupVersionResource]*meta.RESTMapping{}
	for _, o := range desired {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			// The kind is not served at all: every such object is missing.
			out = append(out, Difference{Change: Missing, Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(),
				Live: "kind not served (CRD not installed)"})
			continue
		}
		kinds[m.Resource] = m
		want[m.Resource.String()+"/"+o.GetNamespace()+"/"+o.GetName()] = true
		live, err := resourceFor(client, m, o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			out = append(out, Difference{Change: Missing, Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		for _, fd := range Fields(o.Object, live.Object) {
			fd.Kind, fd.Namespace, fd.Name = o.GetKind(), o.GetNamespace(), o.GetName()
			out = append(out, fd)
		}
	}
	if len(owner) > 0 {
		sel := labels.SelectorFromSet(owner).String()
		var gvrs []schema.GroupVersionResource
		for g := range kinds {
			gvrs = append(gvrs, g)
		}
		sort.Slice(gvrs, func(i, j int) bool { return gvrs[i].String() < gvrs[j].String() })
		for _, g := range gvrs {
			list, err := client.Resource(g).List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", g.Resource, err)
			}
			for _, it := range list.Items {
				if !want[g.String()+"/"+it.GetNamespace()+"/"+it.GetName()] {
					out = append(out, Difference{Change: Extra, Kind: kinds[g].GroupVersionKind.Kind, Namespace: it.GetNamespace(), Name: it.GetName()})
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Object() != out[j].Object() {
			return out[i].Object() < out[j].Object()
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

func resourceFor(client dynamic.Interface, m *meta.RESTMapping, ns string) dynamic.ResourceInterface {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return client.Resource(m.Resource).Namespace(ns)
	}
	return client.Resource(m.Resource)
}

// ignoredMetadata are metadata fields the render never owns alone.
var comparedMetadata = map[string]bool{"labels": true, "annotations": true}

// Fields compares the fields that desired sets with live and returns one
// Changed difference per leaf that differs (Kind and name left empty).
func Fields(desired, live map[string]any) []Difference {
	var out []Difference
	for _, k := range sortedKeys(desired) {
		switch k {
		case "apiVersion", "kind", "status":
			continue
		case "metadata":
			dm, _ := desired[k].(map[string]any)
			lm, _ := live[k].(map[string]any)
			for _, mk := range sortedKeys(dm) {
				if comparedMetadata[mk] {
					walk(&out, "metadata."+mk, dm[mk], lm[mk])
				}
			}
			continue
		}
		walk(&out, k, desired[k], live[k])
	}
	return out
}

func walk(out *[]Difference, path string, d, l any) {
	switch dv := d.(type) {
	case map[string]any:
		lv, ok := l.(map[string]any)
		if !ok {
			if len(dv) == 0 && l == nil {
				return // {} and absent mean the same to the server
			}
			*out = append(*out, Difference{Change: Changed, Path: path, Pinned: show(d), Live: show(l)})
			return
		}
		for _, k := range sortedKeys(dv) {
			walk(out, path+field(k), dv[k], lv[k])
		}
	case []any:
		lv, _ := l.([]any)
		if named(dv) && named(lv) {
			byName := map[string]any{}
			for _, it := range lv {
				byName[itemName(it)] = it
			}
			seen := map[string]bool{}
			for _, it := range dv {
				n := itemName(it)
				seen[n] = true
				walk(out, path+"["+n+"]", it, byName[n])
			}
			for _, it := range lv {
				if n := itemName(it); !seen[n] {
					*out = append(*out, Difference{Change: Changed, Path: path + "[" + n + "]", Live: show(it)})
				}
			}
			return
		}
		if len(dv) != len(lv) {
			*out = append(*out, Difference{Change: Changed, Path: path, Pinned: show(d), Live: show(l)})
			return
		}
		for i := range dv {
			walk(out, fmt.Sprintf("%s[%d]", path, i), dv[i], lv[i])
		}
	default:
		if !scalarEqual(d, l) {
			*out = append(*out, Difference{Change: Changed, Path: path, Pinned: show(d), Live: show(l)})
		}
	}
}

// field renders a map key as a path element: .name or ["nvidia.com/gpu"].
func field(k string) string {
	if strings.ContainsAny(k, "./") {
		return fmt.Sprintf("[%q]", k)
	}
	return "." + k
}

func named(items []any) bool {
	if len(items) == 0 {
		return false
	}
	for _, it := range items {
		if itemName(it) == "" {
			return false
		}
	}
	return true
}

func itemName(it any) string {
	m, ok := it.(map[string]any)
	if !ok {
		return ""
	}
	n, _ := m["name"].(string)
	return n
}

// scalarEqual compares leaves: by quantity value when both parse as
// Kubernetes quantities, else by string form.
func scalarEqual(d, l any) bool {
	ds, ls := fmt.Sprint(d), fmt.Sprint(l)
	if l == nil {
		return d == nil
	}
	if ds == ls {
		return true
	}
	dq, err1 := resource.ParseQuantity(ds)
	lq, err2 := resource.ParseQuantity(ls)
	return err1 == nil && err2 == nil && dq.Cmp(lq) == 0
}

func show(v any) string {
	if v == nil {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case map[string]any, []any:
		s := fmt.Sprint(x)
		if len(s) > 120 {
			s = s[:117] + "..."
		}
		return s
	default:
		return fmt.Sprint(x)
	}
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
