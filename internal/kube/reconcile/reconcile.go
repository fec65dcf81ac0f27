// Package reconcile brings a cluster to a render: server-side apply of every
// object with gpupolicy's own field manager, in dependency order, and pruning
// of the objects gpupolicy owns that the render no longer has.
//
// What it models:
//   - Server-side apply (KEP-555): a field manager owns the fields it applies;
//     Force takes over fields another manager set by hand, as GitOps
//     reconcilers (Flux, Argo CD with ServerSideApply=true) do.
//   - Order: Namespaces first, then cluster-scoped objects, then namespaced
//     ones. Kinds backed by a CRD (Kueue, Argo) are applied only once their
//     CRD is served; a missing CRD is an error that names it, before anything
//     is applied.
//   - Idempotence: an apply that changes nothing leaves resourceVersion as it
//     was, and is reported "unchanged".
//   - Pruning: only objects that carry the ownership labels (Owner) are ever
//     deleted, and only after every apply succeeded. Namespaces are never
//     pruned: deleting one deletes everything in it, including what
//     gpupolicy does not own (the device plugin, the model servers).
package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/gpupolicy/gpupolicy/internal/finding"
)

// FieldManager is the server-side apply field manager of gpupolicy.
const FieldManager = "gpupolicy"

// Action says what reconcile did (or, in a dry run, would do) to one object.
type Action string

const (
	Created    Action = "created"
	Configured Action = "configured"
	Unchanged  Action = "unchanged"
	Pruned     Action = "pruned"
	Failed     Action = "failed"
	NotApplied Action = "not applied"
)

// Change is one object's outcome.
type Change struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Action    Action `json:"action"`
	Error     string `json:"error,omitempty"`
	// Note qualifies the action, e.g. that a dry run could not ask the
	// server about an object whose namespace the same run creates.
	Note string `json:"note,omitempty"`
}

func (c Change) String() string {
	id := c.Kind + "/" + c.Name
	if c.Namespace != "" {
		id = c.Kind + "/" + c.Namespace + "/" + c.Name
	}
	switch {
	case c.Error != "":
		return fmt.Sprintf("%s %s: %s", id, c.Action, c.Error)
	case c.Note != "":
		return fmt.Sprintf("%s %s (%s)", id, c.Action, c.Note)
	}
	return fmt.Sprintf("%s %s", id, c.Action)
}

// Result lists every object's outcome in the order reconcile took them.
type Result struct {
	DryRun  bool     `json:"dryRun"`
	Changes []Change `json:"changes"`
	// Nodes are the GPU nodes node readiness applied to (ReadyNodes), and
	// NodeFindings what it found: a card with no node, a node two cards
	// select.
	Nodes        []Change     `json:"nodes,omitempty"`
	NodeFindings finding.List `json:"nodeFindings,omitempty"`
}

// Count returns how many changes had the action (objects, not nodes).
func (r *Result) Count(a Action) int {
	n := 0
	for _, c := range r.Changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

// NodesChanged returns how many nodes node readiness changed.
func (r *Result) NodesChanged() int {
	n := 0
	for _, c := range r.Nodes {
		if c.Action != Unchanged {
			n++
		}
	}
	return n
}

// Changed reports whether anything was created, configured or pruned,
// nodes included.
func (r *Result) Changed() bool {
	return r.Count(Created)+r.Count(Configured)+r.Count(Pruned)+r.NodesChanged() > 0
}

// Options configure a reconcile.
type Options struct {
	// Owner are the labels that mark objects this reconcile owns, e.g.
	// app.kubernetes.io/managed-by=gpupolicy, gpupolicy.dev/policy=lab.
	// Every desired object must carry them; only objects carrying them are
	// pruned.
	Owner map[string]string
	// DryRun uses the API server's dry run: every admission check runs,
	// nothing is persisted, nothing is pruned.
	DryRun bool
	// Progress, if set, is called after each object.
	Progress func(Change)
	// Kinds are further kinds to prune (render's contract.RenderedKinds):
	// owned objects of a kind desired has none of are pruned too, so that
	// a render dropping the last object of a kind (a policy that no longer
	// declares Cohorts) leaves none behind. A kind the cluster does not
	// serve holds nothing and is skipped; Namespaces are never pruned.
	Kinds []schema.GroupVersionKind
}

// Reconciler applies renders to one cluster.
type Reconciler struct {
	Client dynamic.Interface
	Mapper meta.RESTMapper
}

// Apply reconciles the cluster to desired. It returns the Result even on
// error: what was applied, what failed, and what was not reached. A rerun
// after a failure completes the work, because every step is idempotent.
func (r *Reconciler) Apply(ctx context.Context, desired []*unstructured.Unstructured, opts Options) (*Result, error) {
	res := &Result{DryRun: opts.DryRun}
	if len(opts.Owner) == 0 {
		return res, fmt.Errorf("reconcile: no ownership labels; refusing to prune without them")
	}
	objs := Order(desired)
	// Resolve every kind first, so a missing CRD stops the run before any
	// object is applied.
	mappings := make([]*meta.RESTMapping, len(objs))
	for i, o := range objs {
		for k, v := range opts.Owner {
			if o.GetLabels()[k] != v {
				return res, fmt.Errorf("%s %s lacks ownership label %s=%s", o.GetKind(), o.GetName(), k, v)
			}
		}
		gvk := o.GroupVersionKind()
		m, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return res, fmt.Errorf("the cluster does not serve %s (is its CRD installed? Kueue v0.17 and Argo Workflows v3.7 are needed): %w", gvk, err)
		}
		mappings[i] = m
	}
	var dryRun []string
	if opts.DryRun {
		dryRun = []string{metav1.DryRunAll}
	}
	force := true
	newNamespaces := map[string]bool{}
	for i, o := range objs {
		ch := Change{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
		action, err := r.applyOne(ctx, mappings[i], o, dryRun, force)
		if err == nil && action == Created && o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "" {
			newNamespaces[o.GetName()] = true
		}
		if err != nil && opts.DryRun && apierrors.IsNotFound(err) && newNamespaces[o.GetNamespace()] {
			// A dry run stores nothing, so the namespace it would create
			// does not exist for the objects in it.
			action, err = Created, nil
			ch.Note = "its namespace is new in this run, so the server could not check it"
		}
		if err != nil {
			ch.Action, ch.Error = Failed, err.Error()
			res.Changes = append(res.Changes, ch)
			report(opts, ch)
			for _, rest := range objs[i+1:] {
				res.Changes = append(res.Changes, Change{Kind: rest.GetKind(), Namespace: rest.GetNamespace(), Name: rest.GetName(), Action: NotApplied})
			}
			return res, fmt.Errorf("applying %s: %w", ch.String(), err)
		}
		ch.Action = action
		res.Changes = append(res.Changes, ch)
		report(opts, ch)
	}
	if opts.DryRun {
		return res, nil
	}
	if err := r.prune(ctx, objs, mappings, opts, res); err != nil {
		return res, err
	}
	return res, nil
}

func report(opts Options, ch Change) {
	if opts.Progress != nil {
		opts.Progress(ch)
	}
}

func (r *Reconciler) resource(m *meta.RESTMapping, ns string) dynamic.ResourceInterface {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.Client.Resource(m.Resource).Namespace(ns)
	}
	return r.Client.Resource(m.Resource)
}

func (r *Reconciler) applyOne(ctx context.Context, m *meta.RESTMapping, o *unstructured.Unstructured, dryRun []string, force bool) (Action, error) {
	ri := r.resource(m, o.GetNamespace())
	before, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return Failed, err
	}
	body, err := json.Marshal(o.Object)
	if err != nil {
		return Failed, err
	}
	after, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		FieldManager: FieldManager, Force: &force, DryRun: dryRun,
	})
	if err != nil {
		return Failed, err
	}
	switch {
	case !exists:
		return Created, nil
	case sameApart(before, after):
		return Unchanged, nil
	default:
		return Configured, nil
	}
}

// sameApart reports whether the apply left the object as it was, apart
// from what others write beside it: the status (a controller's: the API
// server type-checks a ValidatingAdmissionPolicy and writes the result into
// its status some time after every create, which bumps resourceVersion
// between one reconcile's read and its apply), and the bookkeeping that
// follows (resourceVersion, managedFields).
func sameApart(before, after *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy().Object
		delete(c, "status")
		unstructured.RemoveNestedField(c, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(c, "metadata", "managedFields")
		return c
	}
	return equality.Semantic.DeepEqual(strip(before), strip(after))
}

// prune deletes owned objects of the rendered kinds (and of opts.Kinds)
// that desired lacks.
func (r *Reconciler) prune(ctx context.Context, objs []*unstructured.Unstructured, mappings []*meta.RESTMapping, opts Options, res *Result) error {
	want := map[string]bool{}
	kinds := map[schema.GroupVersionResource]*meta.RESTMapping{}
	for i, o := range objs {
		want[key(o.GetKind(), o.GetNamespace(), o.GetName())] = true
		if o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "" {
			continue // never pruned
		}
		kinds[mappings[i].Resource] = mappings[i]
	}
	for _, gvk := range opts.Kinds {
		if gvk.Kind == "Namespace" && gvk.Group == "" {
			continue
		}
		m, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			continue // not served: nothing of it to prune
		}
		if err != nil {
			return fmt.Errorf("mapping %s to prune: %w", gvk.Kind, err)
		}
		kinds[m.Resource] = m
	}
	sel := labels.SelectorFromSet(opts.Owner).String()
	var gvrs []schema.GroupVersionResource
	for g := range kinds {
		gvrs = append(gvrs, g)
	}
	sort.Slice(gvrs, func(i, j int) bool { return gvrs[i].String() < gvrs[j].String() })
	for _, g := range gvrs {
		list, err := r.Client.Resource(g).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return fmt.Errorf("listing %s to prune: %w", g.Resource, err)
		}
		items := list.Items
		sort.Slice(items, func(i, j int) bool {
			return key("", items[i].GetNamespace(), items[i].GetName()) < key("", items[j].GetNamespace(), items[j].GetName())
		})
		for _, it := range items {
			kind := kinds[g].GroupVersionKind.Kind
			if want[key(kind, it.GetNamespace(), it.GetName())] {
				continue
			}
			ch := Change{Kind: kind, Namespace: it.GetNamespace(), Name: it.GetName(), Action: Pruned}
			err := r.resource(kinds[g], it.GetNamespace()).Delete(ctx, it.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				ch.Action, ch.Error = Failed, err.Error()
				res.Changes = append(res.Changes, ch)
				report(opts, ch)
				return fmt.Errorf("pruning %s: %w", ch.String(), err)
			}
			res.Changes = append(res.Changes, ch)
			report(opts, ch)
		}
	}
	return nil
}

func key(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

// rank orders objects: Namespaces, then CRDs, then other cluster-scoped
// objects the rest refer to (ResourceFlavors, WorkloadPriorityClasses and
// Cohorts before the ClusterQueues that name them), then namespaced objects
// (LocalQueues after their ClusterQueue, ConfigMaps and LimitRanges before the
// WorkflowTemplates that use them).
var rank = map[string]int{
	"Namespace":                0,
	"CustomResourceDefinition": 1,
	"ResourceFlavor":           2,
	"WorkloadPriorityClass":    2,
	"Cohort":                   2,
	"ClusterQueue":             3,
	// The admission policies before their bindings, and both before what
	// runs in the namespaces they guard.
	"ValidatingAdmissionPolicy":        2,
	"ValidatingAdmissionPolicyBinding": 3,
	"LimitRange":                       4,
	"ConfigMap":                        4,
	"LocalQueue":                       5,
	"WorkflowTemplate":                 6,
}

// Order returns the objects in apply order: by rank (unknown kinds after
// the known ones), then kind, namespace and name.
func Order(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := append([]*unstructured.Unstructured(nil), objs...)
	r := func(o *unstructured.Unstructured) int {
		if v, ok := rank[o.GetKind()]; ok {
			return v
		}
		if o.GetNamespace() == "" {
			return 3
		}
		return 7
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if r(a) != r(b) {
			return r(a) < r(b)
		}
		return strings.Join([]string{a.GetKind(), a.GetNamespace(), a.GetName()}, "/") <
			strings.Join([]string{b.GetKind(), b.GetNamespace(), b.GetName()}, "/")
	})
	return out
}
