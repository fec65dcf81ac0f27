package policy

// SharesResource is the resource name under which the device plugin
// advertises the card's time-slicing shares: nvidia.com/gpu, or
// nvidia.com/gpu.shared when the device plugin renames shared resources
// (devicePlugin.renameByDefault). Quotas and requests must use this name, or
// nothing on the node satisfies them.
func (p *Policy) SharesResource() string {
	if p.DevicePlugin.RenameByDefault {
		return ResourceShares + ".shared"
	}
	return ResourceShares
}

// Namespaces returns every namespace the policy puts something in, sorted:
// the LocalQueues' namespaces, the services', the templates' and the device
// plugin's.
func (p *Policy) Namespaces() []string {
	set := map[string]bool{}
	for _, q := range p.Queues {
		for _, ns := range q.Namespaces {
			set[ns] = true
		}
	}
	for _, s := range p.Services {
		set[s.Namespace] = true
	}
	for _, t := range p.Templates {
		set[t.Namespace] = true
	}
	if p.DevicePlugin.Namespace != "" {
		set[p.DevicePlugin.Namespace] = true
	}
	delete(set, "")
	return sortedKeys(set)
}
