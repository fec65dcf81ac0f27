package policy

import (
	"slices"
)

// SharesResource is the resource name under which the device plugin
// advertises the card's time-slicing shares (SharesResourceName of
// devicePlugin.renameByDefault). Quotas, requests and explain's margins all
// use this name, or nothing on the node satisfies them.
func (p *Policy) SharesResource() string {
	return SharesResourceName(p.DevicePlugin.RenameByDefault)
}

// SharesResourceName is the resource a node advertises the shares under:
// nvidia.com/gpu, or nvidia.com/gpu.shared when the device plugin renames
// shared resources (renameByDefault).
func SharesResourceName(renameByDefault bool) string {
	if renameByDefault {
		return ResourceShares + ".shared"
	}
	return ResourceShares
}

// IsSharesResource reports whether a resource name, read from a manifest
// without its policy, carries shares: nvidia.com/gpu with or without
// renameByDefault.
func IsSharesResource(name string) bool {
	return name == SharesResourceName(false) || name == SharesResourceName(true)
}

// Namespaces returns every namespace the policy puts something in, sorted:
// the LocalQueues' namespaces, the services', the templates' and the device
// plugin's.
func (p *Policy) Namespaces() []string {
	ns := p.GPUNamespaces()
	if d := p.DevicePlugin.Namespace; d != "" && !slices.Contains(ns, d) {
		ns = append(ns, d)
		slices.Sort(ns)
	}
	return ns
}
