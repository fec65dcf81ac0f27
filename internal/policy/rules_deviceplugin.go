package policy

import "fmt"

// RuleMultiShareRefused: a template or service asking more than one share
// while the device plugin's failRequestsGreaterThanOne is true. The NVIDIA
// k8s-device-plugin refuses such a container when the kubelet allocates its
// devices (NvidiaDevicePlugin.Allocate, internal/plugin/server.go), and the
// kubelet fails the pod with UnexpectedAdmissionError — after Kueue admitted
// it and counted its quota: the step can never run.
var RuleMultiShareRefused = vetRule("multi-share-refused",
	"with the device plugin's failRequestsGreaterThanOne a pod that asks more than one share is refused at the node (UnexpectedAdmissionError) after Kueue admitted it: such a step can never run")

// multiShare applies RuleMultiShareRefused.
func (c *checker) multiShare() {
	p := c.p
	if !p.DevicePlugin.FailRequestsGreaterThanOne {
		return
	}
	why := func(what string, shares int64) string {
		return fmt.Sprintf("%s asks %d shares, and devicePlugin.failRequestsGreaterThanOne is true: the NVIDIA device plugin refuses the container "+
			"when the kubelet allocates its shares (\"request for '%s: %d' too large: maximum request size for shared resources is 1\", "+
			"NvidiaDevicePlugin.Allocate) and the pod fails with UnexpectedAdmissionError, after Kueue admitted it and counted its quota. "+
			"Ask 1 share, or set failRequestsGreaterThanOne to false (then %d shares take %d of the quota but, on a node with one card, give no more GPU than 1)",
			what, shares, p.SharesResource(), shares, shares, shares)
	}
	for _, n := range p.ServiceNames() {
		if s := p.Services[n]; s.Request.Shares > 1 {
			c.add(RuleMultiShareRefused, []string{"services", n, "shares"}, "%s", why("service "+n, s.Request.Shares))
		}
	}
	for _, n := range p.TemplateNames() {
		if t := p.Templates[n]; t.Request.Shares > 1 {
			c.add(RuleMultiShareRefused, []string{"templates", n, "shares"}, "%s", why("template "+n, t.Request.Shares))
		}
	}
}
