package policy

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// DevicePluginConfigLabel is the node label by which the NVIDIA device
// plugin picks its entry of the time-slicing ConfigMap (one entry per card,
// named after it).
const DevicePluginConfigLabel = "nvidia.com/device-plugin.config"

// Nodes returns the label selector of the card's nodes: the policy's
// nodes.selector, or else its nodeLabels. An empty selector (neither set)
// selects nothing here: a card without node labels has no known nodes.
func (c Card) Nodes() (labels.Selector, error) {
	if c.NodeSelector == "" {
		if len(c.NodeLabels) == 0 {
			return labels.Nothing(), nil
		}
		return labels.SelectorFromSet(c.NodeLabels), nil
	}
	sel, err := labels.Parse(c.NodeSelector)
	if err != nil {
		return nil, err
	}
	if sel.Empty() {
		return nil, fmt.Errorf("the selector %q selects every node", c.NodeSelector)
	}
	return sel, nil
}

// NodeSelectorString is Nodes as kubectl -l writes it.
func (c Card) NodeSelectorString() string {
	sel, err := c.Nodes()
	if err != nil {
		return c.NodeSelector
	}
	return sel.String()
}

// NodeDeclarationMiB is what each of the card's nodes advertises of the
// declaration resource: the card's memory times the cards on the node.
func (c Card) NodeDeclarationMiB() int64 {
	n := c.CardsPerNode
	if n < 1 {
		n = 1
	}
	return c.MemoryMiB * n
}

// missingNodeLabels returns the nodeLabels pairs the selector does not
// require with = or ==: a node it picks may lack them, and Kueue places the
// card's jobs only on nodes carrying them.
func missingNodeLabels(sel labels.Selector, nodeLabels map[string]string) []string {
	reqs, _ := sel.Requirements()
	var out []string
	for _, k := range slices.Sorted(maps.Keys(nodeLabels)) {
		ok := false
		for _, r := range reqs {
			if r.Key() == k && (r.Operator() == selection.Equals || r.Operator() == selection.DoubleEquals || r.Operator() == selection.In) &&
				r.Values().Len() == 1 && r.Values().Has(nodeLabels[k]) {
				ok = true
			}
		}
		if !ok {
			out = append(out, k+"="+nodeLabels[k])
		}
	}
	return out
}
