package admission

import (
	"fmt"

	"github.com/gpupolicy/gpupolicy/internal/finding"
)

// RuleMultiShare: a template or service that asks more than one share,
// with the device plugin's failRequestsGreaterThanOne false (with it true,
// vet refuses the policy: multi-share-refused). The plugin hands the
// container that many time-slicing replicas (NvidiaDevicePlugin.Allocate
// refuses more than one only under the option); on a node with one card
// they are replicas of the same GPU, which time-slicing shares by time
// with every other pod on it: no more compute and no more memory than one
// share. What the extra shares do is take quota, so fewer jobs run beside
// it. Info: a step can ask several shares on purpose, to keep others off
// the card.
var RuleMultiShare = explainRule("multi-share", finding.Info, nil,
	"a step that asks several time-slicing shares gets no more GPU than one on a one-card node: the extra shares only take quota, so fewer jobs run beside it")

// multiShare reports every template and service asking more than one share.
func (e *explainer) multiShare() {
	if e.p.DevicePlugin.FailRequestsGreaterThanOne {
		return // vet's multi-share-refused
	}
	what := func(kind, name, queue, card string, shares int64) string {
		c := e.p.Cards[card]
		gpu := fmt.Sprintf("on %s's nodes (one card each) they are replicas of the same GPU, which time-slicing shares by time with every pod on it: "+
			"no more compute and no more GPU memory than 1 share", card)
		if c.CardsPerNode > 1 {
			gpu = fmt.Sprintf("on %s's nodes (%d cards each) the plugin may hand out replicas of one card or of several: "+
				"it is not guaranteed more GPU than 1 share", card, c.CardsPerNode)
		}
		return fmt.Sprintf("%s %s asks %d shares; devicePlugin.failRequestsGreaterThanOne is false, so the NVIDIA device plugin hands the container %d time-slicing replicas of %s, "+
			"and %s. What the %d shares do is take %d of %s's share quota on %s (explain counts them so), so fewer jobs run beside it",
			kind, name, shares, shares, e.p.SharesResource(), gpu, shares, shares, queue, card)
	}
	for _, n := range e.p.ServiceNames() {
		if s := e.p.Services[n]; s.Request.Shares > 1 {
			e.add(RuleMultiShare, finding.Info, []string{"services", n, "shares"}, "%s", what("service", n, s.Queue, s.Card, s.Request.Shares))
		}
	}
	for _, n := range e.p.TemplateNames() {
		// An exclusive step asks every share left on purpose: its own
		// section says what that does (Exclusives).
		if t := e.p.Templates[n]; t.Request.Shares > 1 && t.Exclusive == nil {
			e.add(RuleMultiShare, finding.Info, []string{"templates", n, "shares"}, "%s", what("template", n, t.Queue, t.Card, t.Request.Shares))
		}
	}
}
