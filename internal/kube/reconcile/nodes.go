package reconcile

// Node readiness: what a GPU node must carry, beyond what the NVIDIA device
// plugin gives it, for the GPU steps Kueue admits to be scheduled.
//
//   - The declaration resource (gpupolicy.dev/gpu-memory by default). Pods
//     request it so that Kueue counts their GPU memory, and kube-scheduler's
//     NodeResourcesFit filter then needs a node that advertises it. Nothing
//     on a real node does: the device plugin advertises nvidia.com/gpu only.
//     It is advertised the way Kubernetes documents for node-level extended
//     resources, in the Node's status (capacity, and allocatable, which a
//     kubelet recomputes from capacity), at the card's memory in MiB times
//     the cards on the node.
//   - The device plugin's config label nvidia.com/device-plugin.config=CARD,
//     by which the plugin picks the card's entry of the rendered
//     time-slicing ConfigMap.
//
// Both are written with server-side apply under their own field manager
// (NodeFieldManager), one apply for the label and one for the status
// subresource, so that nothing else of a Node is touched. When a node
// leaves the selection both come off again (releaseNode), key by key.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// NodeFieldManager owns what node readiness writes on a Node.
const NodeFieldManager = "gpupolicy-node-readiness"

// NodesGVR is the core Node resource.
var NodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// The rules about GPU nodes, reported by drift --live and by reconcile.
var (
	RuleNodeNotReady = finding.Register(finding.Rule{ID: "node-not-ready", Verb: finding.Drift, Severity: finding.Error,
		Reason: "a GPU node that does not advertise the declaration resource runs none of the GPU steps Kueue admits: they stay Pending"})
	RuleNodeMissing = finding.Register(finding.Rule{ID: "node-missing", Verb: finding.Drift, Severity: finding.Error,
		Reason: "a card whose node selector matches no node has nowhere to run: every GPU step Kueue admits on it stays Pending"})
	RuleNodeConflict = finding.Register(finding.Rule{ID: "node-conflict", Verb: finding.Drift, Severity: finding.Error,
		Reason: "a node selected for two cards cannot carry both device-plugin configs nor both declarations"})
	RulePodUnschedulable = finding.Register(finding.Rule{ID: "gpu-pod-unschedulable", Verb: finding.Drift, Severity: finding.Error,
		Reason: "a GPU step Kueue admitted that the scheduler cannot place holds quota and its lock while it waits"})
)

// NodeWant is what every node of one card must carry.
type NodeWant struct {
	Card     string `json:"card"`
	Selector string `json:"selector"`
	// Resource is the declaration resource, Declaration its per-node
	// quantity (the card's memory × cards per node).
	Resource    string `json:"resource"`
	Declaration string `json:"declaration"`
	// Label is the device-plugin config label, Value the card.
	Label string `json:"label"`
	Value string `json:"value"`

	sel labels.Selector
}

// NodeWants returns what each card's nodes must carry, by card name.
func NodeWants(p *policy.Policy) ([]NodeWant, error) {
	var out []NodeWant
	for _, n := range p.CardNames() {
		c := p.Cards[n]
		sel, err := c.Nodes()
		if err != nil {
			return nil, fmt.Errorf("card %s: nodes.selector: %w", n, err)
		}
		if sel.Empty() || c.NodeSelector == "" && len(c.NodeLabels) == 0 {
			continue // no nodes (vet's card-without-nodes when it has quota)
		}
		out = append(out, NodeWant{
			Card: n, Selector: sel.String(), sel: sel,
			Resource:    p.DeclarationResource,
			Declaration: policy.MiBString(c.NodeDeclarationMiB()),
			Label:       policy.DevicePluginConfigLabel, Value: n,
		})
	}
	return out, nil
}

// NodeState is one GPU node as the cluster holds it, against what it must
// carry.
type NodeState struct {
	Node string `json:"node"`
	// Card is the card whose selector picks the node; empty for a node
	// that left every selection but still carries what reconcile wrote.
	Card string `json:"card,omitempty"`
	// Cards lists every card whose selector picks the node, when more
	// than one does (a conflict).
	Cards []string `json:"cards,omitempty"`
	// Want is the declaration it must advertise ("" when leaving);
	// Capacity and Allocatable, what it advertises ("" none).
	Resource    string `json:"resource"`
	Want        string `json:"want,omitempty"`
	Capacity    string `json:"capacity,omitempty"`
	Allocatable string `json:"allocatable,omitempty"`
	// Label is the device-plugin config label's value on the node.
	WantLabel string `json:"wantLabel,omitempty"`
	Label     string `json:"label,omitempty"`
	// Ready: it advertises Want in capacity and allocatable and carries
	// WantLabel. Leaving: no card selects it but NodeFieldManager still
	// owns fields of it.
	Ready   bool `json:"ready"`
	Leaving bool `json:"leaving,omitempty"`
}

// Problem says what is wrong with the node, in the lab's words; "" when
// it is ready (or leaving).
func (s NodeState) Problem() string {
	if s.Ready || s.Leaving {
		return ""
	}
	if len(s.Cards) > 1 {
		return fmt.Sprintf("node %s is selected for cards %s; give the cards disjoint node selectors", s.Node, strings.Join(s.Cards, " and "))
	}
	var miss []string
	if !sameQuantity(s.Capacity, s.Want) || !sameQuantity(s.Allocatable, s.Want) {
		have := "nothing"
		if s.Allocatable != "" {
			have = s.Allocatable
		}
		miss = append(miss, fmt.Sprintf("every GPU step Kueue admits stays Pending: the node does not advertise %s (%s, want %s)", s.Resource, have, s.Want))
	}
	if s.Label != s.WantLabel {
		have := "no " + policy.DevicePluginConfigLabel + " label"
		if s.Label != "" {
			have = policy.DevicePluginConfigLabel + "=" + s.Label
		}
		miss = append(miss, fmt.Sprintf("the device plugin may pick another card's time-slicing config: the node has %s, want %s=%s", have, policy.DevicePluginConfigLabel, s.WantLabel))
	}
	return fmt.Sprintf("GPU node %s (card %s): %s; make it ready with gpupolicy reconcile", s.Node, s.Card, strings.Join(miss, "; "))
}

// NodeMissing is a card whose selector matches no node.
type NodeMissing struct {
	Card     string `json:"card"`
	Selector string `json:"selector"`
}

// NodeReport is every GPU node's readiness.
type NodeReport struct {
	Nodes   []NodeState   `json:"nodes"`
	Missing []NodeMissing `json:"missing"`
}

// Ready reports whether every selected node is ready and none is missing.
func (r *NodeReport) Ready() bool {
	if len(r.Missing) > 0 {
		return false
	}
	for _, n := range r.Nodes {
		if !n.Ready && !n.Leaving {
			return false
		}
	}
	return true
}

// Findings are the report's findings: a missing node, a conflict, a node
// that is not ready. A node leaving the selection is not a finding: the
// next reconcile takes its readiness off.
func (r *NodeReport) Findings() finding.List {
	out := finding.List{}
	for _, m := range r.Missing {
		f := RuleNodeMissing.Newf("card %s: no node matches its selector %s, so every GPU step Kueue admits on it stays Pending; label the card's nodes or fix cards.%s.nodes.selector",
			m.Card, m.Selector, m.Card)
		f.Path = policy.PathString("cards", m.Card, "nodes", "selector")
		out = append(out, f)
	}
	for _, n := range r.Nodes {
		p := n.Problem()
		if p == "" {
			continue
		}
		rule := RuleNodeNotReady
		if len(n.Cards) > 1 {
			rule = RuleNodeConflict
		}
		f := rule.New(p)
		f.Object = "Node/" + n.Node
		out = append(out, f)
	}
	return out
}

// ReadNodes lists the cluster's nodes (one list call) and says for each node
// a card selects, or that reconcile made ready before, whether it carries
// what it must. It only lists.
func ReadNodes(ctx context.Context, client dynamic.Interface, p *policy.Policy) (*NodeReport, error) {
	wants, err := NodeWants(p)
	if err != nil {
		return nil, err
	}
	list, err := client.Resource(NodesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return nodeReport(wants, p.DeclarationResource, list.Items), nil
}

func nodeReport(wants []NodeWant, resource string, nodes []unstructured.Unstructured) *NodeReport {
	r := &NodeReport{Nodes: []NodeState{}, Missing: []NodeMissing{}}
	matched := map[string]bool{}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].GetName() < nodes[j].GetName() })
	for _, n := range nodes {
		var cards []string
		var w NodeWant
		for _, cand := range wants {
			if cand.sel.Matches(labels.Set(n.GetLabels())) {
				cards = append(cards, cand.Card)
				matched[cand.Card] = true
				if len(cards) == 1 {
					w = cand
				}
			}
		}
		st := NodeState{Node: n.GetName(), Resource: resource, Label: n.GetLabels()[policy.DevicePluginConfigLabel]}
		st.Capacity, _, _ = unstructured.NestedString(n.Object, "status", "capacity", resource)
		st.Allocatable, _, _ = unstructured.NestedString(n.Object, "status", "allocatable", resource)
		switch {
		case len(cards) == 0:
			if !managedBy(&n, NodeFieldManager) {
				continue
			}
			st.Leaving = true
		default:
			st.Card, st.Want, st.WantLabel = w.Card, w.Declaration, w.Value
			if len(cards) > 1 {
				st.Cards = cards
			} else {
				st.Ready = sameQuantity(st.Capacity, st.Want) && sameQuantity(st.Allocatable, st.Want) && st.Label == st.WantLabel
			}
		}
		r.Nodes = append(r.Nodes, st)
	}
	for _, w := range wants {
		if !matched[w.Card] {
			r.Missing = append(r.Missing, NodeMissing{Card: w.Card, Selector: w.Selector})
		}
	}
	return r
}

func managedBy(o *unstructured.Unstructured, manager string) bool {
	return slices.ContainsFunc(o.GetManagedFields(), func(m metav1.ManagedFieldsEntry) bool { return m.Manager == manager })
}

func sameQuantity(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	qa, err1 := resource.ParseQuantity(a)
	qb, err2 := resource.ParseQuantity(b)
	if err1 != nil || err2 != nil {
		return a == b
	}
	return qa.Cmp(qb) == 0
}

// ReadyNodes makes every node the policy selects carry the declaration and
// the device-plugin config label, and takes both off the nodes that left
// the selection, with server-side apply under NodeFieldManager (the API
// server's dry run when dryRun). It returns one Change per node it applied
// to and the report of the nodes as they now are (in a dry run, would be);
// a card whose selector matches no node, or a node two cards select, is in
// the report's findings, not an error.
func (r *Reconciler) ReadyNodes(ctx context.Context, p *policy.Policy, dryRun bool, progress func(Change)) ([]Change, *NodeReport, error) {
	rep, err := ReadNodes(ctx, r.Client, p)
	if err != nil {
		return nil, nil, err
	}
	var opts metav1.PatchOptions
	opts.FieldManager = NodeFieldManager
	force := true
	opts.Force = &force
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var changes []Change
	for i, st := range rep.Nodes {
		if len(st.Cards) > 1 {
			continue // a conflict: the report says so, nothing is applied
		}
		ch := Change{Kind: "Node", Name: st.Node}
		labelsBody := map[string]any{}
		status := map[string]any{}
		if st.Leaving {
			ch.Note = fmt.Sprintf("left every card's selection: %s and %s taken off", st.Resource, policy.DevicePluginConfigLabel)
		} else {
			labelsBody[policy.DevicePluginConfigLabel] = st.WantLabel
			status = map[string]any{
				"capacity":    map[string]any{st.Resource: st.Want},
				"allocatable": map[string]any{st.Resource: st.Want},
			}
			ch.Note = fmt.Sprintf("advertises %s=%s, label %s=%s", st.Resource, st.Want, policy.DevicePluginConfigLabel, st.WantLabel)
		}
		var action Action
		if st.Leaving {
			action, err = r.releaseNode(ctx, st, opts)
		} else {
			action, err = r.applyNode(ctx, st.Node, labelsBody, status, opts)
		}
		if err != nil {
			ch.Action, ch.Error = Failed, err.Error()
			changes = append(changes, ch)
			if progress != nil {
				progress(ch)
			}
			return changes, rep, fmt.Errorf("making %s ready: %w", ch.String(), err)
		}
		if st.Leaving && action != Unchanged {
			action = Pruned
		}
		if !st.Leaving { // the report says what the node now is (or, dry, would be)
			n := &rep.Nodes[i]
			n.Capacity, n.Allocatable, n.Label, n.Ready = st.Want, st.Want, st.WantLabel, true
		}
		ch.Action = action
		if action == Unchanged {
			ch.Note = ""
		}
		changes = append(changes, ch)
		if progress != nil {
			progress(ch)
		}
	}
	return changes, rep, nil
}

// applyNode applies the label (main resource) and the status (status
// subresource) of one node and says whether either changed it.
func (r *Reconciler) applyNode(ctx context.Context, name string, nodeLabels, status map[string]any, opts metav1.PatchOptions) (Action, error) {
	ri := r.Client.Resource(NodesGVR)
	before, err := ri.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Failed, fmt.Errorf("node %s is gone", name)
	}
	if err != nil {
		return Failed, err
	}
	md := map[string]any{"name": name}
	if len(nodeLabels) > 0 {
		md["labels"] = nodeLabels
	}
	body, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": md})
	after, err := ri.Patch(ctx, name, types.ApplyPatchType, body, opts)
	if err != nil {
		return Failed, err
	}
	st := map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": name}}
	if len(status) > 0 {
		st["status"] = status
	}
	body, _ = json.Marshal(st)
	after2, err := ri.Patch(ctx, name, types.ApplyPatchType, body, opts, "status")
	if err != nil {
		return Failed, err
	}
	if opts.DryRun != nil {
		// A dry run answers with what the node would be.
		if nodeEqual(before, after) && nodeEqual(before, after2) {
			return Unchanged, nil
		}
		return Configured, nil
	}
	if after2.GetResourceVersion() == before.GetResourceVersion() {
		return Unchanged, nil
	}
	return Configured, nil
}

// releaseNode takes the declaration and the config label off a node that
// left the selection. Not by applying an empty configuration: where no
// other manager owns the node's capacity (a node created with its status,
// as KWOK's are), server-side apply would drop the whole capacity map with
// the one key it releases. A JSON patch removes exactly the two keys, each
// guarded by a test of the value it removes.
func (r *Reconciler) releaseNode(ctx context.Context, st NodeState, opts metav1.PatchOptions) (Action, error) {
	ri := r.Client.Resource(NodesGVR)
	po := metav1.PatchOptions{FieldManager: opts.FieldManager, DryRun: opts.DryRun}
	esc := func(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }
	changed := false
	var ops []map[string]any
	for _, f := range []struct{ field, value string }{{"capacity", st.Capacity}, {"allocatable", st.Allocatable}} {
		if f.value == "" {
			continue
		}
		path := "/status/" + f.field + "/" + esc(st.Resource)
		ops = append(ops, map[string]any{"op": "test", "path": path, "value": f.value}, map[string]any{"op": "remove", "path": path})
	}
	if len(ops) > 0 {
		body, _ := json.Marshal(ops)
		if _, err := ri.Patch(ctx, st.Node, types.JSONPatchType, body, po, "status"); err != nil {
			return Failed, err
		}
		changed = true
	}
	if st.Label != "" {
		path := "/metadata/labels/" + esc(policy.DevicePluginConfigLabel)
		body, _ := json.Marshal([]map[string]any{{"op": "test", "path": path, "value": st.Label}, {"op": "remove", "path": path}})
		if _, err := ri.Patch(ctx, st.Node, types.JSONPatchType, body, po); err != nil {
			return Failed, err
		}
		changed = true
	}
	if !changed {
		return Unchanged, nil
	}
	return Configured, nil
}

// nodeEqual compares what node readiness writes: labels, capacity and
// allocatable.
func nodeEqual(a, b *unstructured.Unstructured) bool {
	if !maps.Equal(a.GetLabels(), b.GetLabels()) {
		return false
	}
	for _, f := range []string{"capacity", "allocatable"} {
		x, _, _ := unstructured.NestedStringMap(a.Object, "status", f)
		y, _, _ := unstructured.NestedStringMap(b.Object, "status", f)
		if !maps.Equal(x, y) {
			return false
		}
	}
	return true
}
