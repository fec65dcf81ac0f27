// Package live is the live side of drift: what a cluster holds of an
// environment's pinned render, read-only (get and list only), and what Kueue
// counted for each Workload against what its pods declare.
//
// The live side plugs into package drift as a drift.Side, so the pin and the
// cluster are compared and explained by the same code as the pin and HEAD.
// Normalization, so that the "out of sync with no diff" noise users report of
// Argo CD does not appear: each live object is projected onto the fields the
// pinned render sets (Project), so defaulted and server-set fields
// (metadata.uid, managedFields, status, a ClusterQueue's defaulted
// flavorFungibility) are never compared; drift.Compare then compares
// quantities by value ("1024Mi" equals "1Gi") and lists of named items by
// name.
package live

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/pager"

	"github.com/gpupolicy/gpupolicy/drift"
)

// Side reads the cluster's copy of every object of a pinned render.
type Side struct {
	Client dynamic.Interface
	Mapper meta.RESTMapper
	// Pinned is the render the cluster should hold.
	Pinned drift.Set
	// Owner selects the objects gpupolicy owns (reconcile's ownership
	// labels); an owned object the render lacks is reported as extra.
	Owner map[string]string
	// Name labels the side in reports ("the cluster"); Where says which
	// cluster ("context lab-admin").
	Name, Where string
	// Engine is the GitOps engine that syncs the environment; nil when
	// none does (reconcile applies the render).
	Engine *EngineTarget
	// Kinds are further kinds to list for owned objects (render's
	// contract.RenderedKinds), so that an owned object of a kind the render
	// no longer has at all (the last Cohort dropped) is reported as extra,
	// as reconcile would prune it (an extra Namespace is reported too, and
	// never pruned). A kind the cluster does not serve is
	// skipped, and so is one this identity may not list (Unlisted says
	// which). Read only when Owner is set.
	Kinds []schema.GroupVersionKind
	// Unlisted are the kinds of Kinds the pin has no object of that the
	// API server forbade this identity to list, set by Objects: an owned
	// object of such a kind would not show as extra.
	Unlisted []string
}

// Label implements drift.Side.
func (s *Side) Label() string { return s.Name }

// Source implements drift.Side.
func (s *Side) Source() string { return s.Where }

// Objects implements drift.Side: each pinned object as the cluster holds it,
// projected onto the fields the render sets; objects the cluster lacks are
// absent; owned objects the render lacks are present whole (metadata aside).
//
// It reads by kind, not by object: one paginated list per kind of the
// render with the owner selector (which also finds the owned objects the
// render lacks), then a get for each pinned object the list did not return
// (its owner labels removed by hand, say). On a cluster holding tens of
// thousands of owned objects that is a few dozen requests, not one each.
func (s *Side) Objects(ctx context.Context) (drift.Set, error) {
	out := drift.Set{}
	mappings := map[schema.GroupVersionResource]*meta.RESTMapping{}
	byKind := map[schema.GroupVersionResource][]string{}
	for _, ref := range s.Pinned.Refs() {
		o := s.Pinned[ref]
		gv, err := schema.ParseGroupVersion(o.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		m, err := s.Mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: o.Kind}, gv.Version)
		if meta.IsNoMatchError(err) {
			continue // the kind is not served: the object is missing
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		mappings[m.Resource] = m
		byKind[m.Resource] = append(byKind[m.Resource], ref)
	}
	extraOnly := map[schema.GroupVersionResource]bool{} // kinds only s.Kinds names
	s.Unlisted = nil
	for _, gvk := range s.Kinds {
		if len(s.Owner) == 0 {
			break
		}
		m, err := s.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			continue // not served: holds nothing
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gvk.Kind, err)
		}
		if _, ok := mappings[m.Resource]; !ok {
			mappings[m.Resource] = m
			extraOnly[m.Resource] = true
		}
	}
	var gvrs []schema.GroupVersionResource
	for g := range mappings {
		gvrs = append(gvrs, g)
	}
	sort.Slice(gvrs, func(i, j int) bool { return gvrs[i].String() < gvrs[j].String() })
	for _, g := range gvrs {
		kind := mappings[g].GroupVersionKind.Kind
		listed := map[string]*unstructured.Unstructured{}
		if len(s.Owner) > 0 {
			items, err := listAll(ctx, s.Client.Resource(g), metav1.ListOptions{LabelSelector: labels.SelectorFromSet(s.Owner).String()})
			if err != nil && extraOnly[g] && apierrors.IsForbidden(err) {
				// A reader granted only the kinds the render has: what it
				// cannot list is said, not a failure of the whole report.
				s.Unlisted = append(s.Unlisted, kind)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", g.Resource, err)
			}
			for i := range items {
				it := &items[i]
				ref := drift.Ref(kind, it.GetNamespace(), it.GetName())
				if _, ok := s.Pinned[ref]; ok {
					listed[ref] = it
					continue
				}
				body := it.Object
				delete(body, "status")
				if md, ok := body["metadata"].(map[string]any); ok {
					body["metadata"] = map[string]any{"name": md["name"], "namespace": md["namespace"], "labels": md["labels"]}
				}
				out[ref] = &drift.Object{APIVersion: it.GetAPIVersion(), Kind: kind, Namespace: it.GetNamespace(), Name: it.GetName(), Body: body}
			}
		}
		for _, ref := range byKind[g] {
			o := s.Pinned[ref]
			live := listed[ref]
			if live == nil {
				got, err := resourceFor(s.Client, mappings[g], o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("reading %s: %w", ref, err)
				}
				live = got
			}
			cp := *o
			cp.Body = Project(o.Body, live.Object)
			out[ref] = &cp
		}
	}
	return out, nil
}

// listPageSize is how many objects one list request returns at most, as
// kubectl get pages (its --chunk-size default).
const listPageSize = 500

// listAll lists every object the options select, page by page
// (client-go's pager: continue tokens, and a full list when the token
// expires).
func listAll(ctx context.Context, ri dynamic.ResourceInterface, opts metav1.ListOptions) ([]unstructured.Unstructured, error) {
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return ri.List(ctx, opts)
	})
	p.PageSize = listPageSize
	var out []unstructured.Unstructured
	err := p.EachListItem(ctx, opts, func(o runtime.Object) error {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("list item is %T, not unstructured", o)
		}
		out = append(out, *u)
		return nil
	})
	return out, err
}

func resourceFor(client dynamic.Interface, m *meta.RESTMapping, ns string) dynamic.ResourceInterface {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return client.Resource(m.Resource).Namespace(ns)
	}
	return client.Resource(m.Resource)
}

// Project returns live restricted to the fields desired sets: maps keep
// desired's keys, lists of named items keep live's items (so an item added
// by hand shows), other lists and scalars are live's values; a field desired
// sets to its zero value ("", false, 0, {}) and live omits counts as equal.
// metadata keeps the name, namespace, and the labels and annotations desired
// sets; status is dropped.
func Project(desired, live map[string]any) map[string]any {
	out := map[string]any{}
	for k, dv := range desired {
		lv, ok := live[k]
		switch k {
		case "status":
			continue
		case "apiVersion", "kind":
			out[k] = dv
			continue
		case "metadata":
			dm, _ := dv.(map[string]any)
			lm, _ := lv.(map[string]any)
			md := map[string]any{}
			for _, mk := range []string{"name", "namespace"} {
				if v, ok := lm[mk]; ok {
					md[mk] = v
				}
			}
			for _, mk := range []string{"labels", "annotations"} {
				if d, ok := dm[mk].(map[string]any); ok {
					if l, ok := lm[mk].(map[string]any); ok {
						md[mk] = projectValue(d, l)
					}
				}
			}
			out[k] = md
			continue
		}
		if ok {
			out[k] = projectValue(dv, lv)
		} else if isZero(dv) {
			out[k] = dv
		}
	}
	return out
}

// isZero reports a value the API server drops when it serializes a field
// marked omitempty: "", false, 0, an empty map or list. The render writing
// storageClassName: "" and the cluster omitting it say the same thing.
func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case int64:
		return x == 0
	case float64:
		return x == 0
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

func projectValue(d, l any) any {
	switch dv := d.(type) {
	case map[string]any:
		lv, ok := l.(map[string]any)
		if !ok {
			return l
		}
		out := map[string]any{}
		for k, x := range dv {
			if y, ok := lv[k]; ok {
				out[k] = projectValue(x, y)
			} else if isZero(x) {
				out[k] = x
			}
		}
		return out
	case []any:
		lv, ok := l.([]any)
		if !ok {
			return l
		}
		if dn := names(dv); dn != nil && names(lv) != nil {
			out := make([]any, 0, len(lv))
			for _, it := range lv {
				if d, ok := dn[drift.ItemName(it)]; ok {
					out = append(out, projectValue(d, it))
				} else {
					out = append(out, it)
				}
			}
			return out
		}
		if len(dv) == len(lv) {
			out := make([]any, len(lv))
			for i := range lv {
				out[i] = projectValue(dv[i], lv[i])
			}
			return out
		}
		return l
	default:
		return l
	}
}

// names indexes a list of named items by name; nil when not every item has
// a name.
func names(items []any) map[string]any {
	if len(items) == 0 {
		return nil
	}
	out := map[string]any{}
	for _, it := range items {
		n := drift.ItemName(it)
		if n == "" {
			return nil
		}
		out[n] = it
	}
	return out
}
