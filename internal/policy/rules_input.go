package policy

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Rules about the policy's input as such: its files, and the text it hands
// on to the manifests.
var (
	RulePolicyFiles = vetRule("policy-files",
		"a policy is the regular .cue files of one directory, all of one CUE package: gpupolicy opens no named pipe or device, and drops no file unseen")
	RuleControlCharacter = vetRule("control-character",
		"text the render copies into manifests (descriptions, model, image, command, paths, node labels) has no control characters: a line break or terminal escape hides in a review")
	RuleDeclarationResource = vetRule("declaration-resource",
		"the GPU-memory declaration has a resource name of its own: nvidia.com/gpu carries the shares and memory the host memory, and Kueue refuses a ClusterQueue that covers one resource twice")
)

// text reports control characters in every free-text string the render
// copies into a manifest.
func (c *checker) text() {
	p := c.p
	check := func(s string, path ...string) {
		for i, r := range s {
			if r == utf8.RuneError || unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
				c.add(RuleControlCharacter, path, "%s has the control character %U at byte %d: write it as plain text on one line",
					PathString(path...), r, i)
				return
			}
		}
	}
	for _, n := range p.CardNames() {
		card := p.Cards[n]
		check(card.Model, "cards", n, "model")
		keys := make([]string, 0, len(card.NodeLabels))
		for k := range card.NodeLabels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			check(k, "cards", n, "nodeLabels")
			check(card.NodeLabels[k], "cards", n, "nodeLabels", k)
		}
		check(card.NodeSelector, "cards", n, "nodes", "selector")
	}
	for _, n := range p.ServiceNames() {
		check(p.Services[n].Description, "services", n, "description")
	}
	for _, pr := range p.Ladder() {
		check(pr.Description, "priorities", pr.Name, "description")
	}
	for _, n := range p.LockNames() {
		check(p.Locks[n].Description, "locks", n, "description")
	}
	for _, n := range p.TemplateNames() {
		t := p.Templates[n]
		check(t.Image, "templates", n, "image")
		for i, a := range t.Command {
			check(a, "templates", n, "command", fmt.Sprint(i))
		}
		if t.ModelCache != nil {
			check(t.ModelCache.MountPath, "templates", n, "modelCache", "mountPath")
		}
	}
}

// declaration reports a declaration resource that names a resource the
// policy already accounts for otherwise.
func (c *checker) declaration() {
	p := c.p
	r := p.DeclarationResource
	switch {
	case r == ResourceHostMemory:
		c.add(RuleDeclarationResource, []string{"declarationResource"},
			"declarationResource %q is host memory's resource: the GPU-memory declaration needs its own (e.g. gpupolicy.dev/gpu-memory)", r)
	case r == p.SharesResource() || strings.HasPrefix(r, ResourceShares) && (r == ResourceShares || r == ResourceShares+".shared"):
		c.add(RuleDeclarationResource, []string{"declarationResource"},
			"declarationResource %q is the shares' resource: the GPU-memory declaration needs its own (e.g. gpupolicy.dev/gpu-memory)", r)
	}
}
