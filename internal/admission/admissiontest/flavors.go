package admissiontest

import "github.com/gpupolicy/gpupolicy/internal/policy"

// CardNodeLabels sets a card's nodeLabels (none: the card pins nothing in
// a queue with several cards).
func (w *PolicyWrapper) CardNodeLabels(name string, labels map[string]string) *PolicyWrapper {
	c := w.p.Cards[name]
	c.NodeLabels = labels
	w.p.Cards[name] = c
	return w
}

// FlavorFungibility sets the queue's flavorFungibility: whenCanBorrow and
// whenCanPreempt (policy.MayStopSearch or policy.TryNextFlavor).
func (q *QueueWrapper) FlavorFungibility(whenCanBorrow, whenCanPreempt string) *QueueWrapper {
	q.q.FlavorFungibility = policy.FlavorFungibility{WhenCanBorrow: whenCanBorrow, WhenCanPreempt: whenCanPreempt}
	return q
}

// AnyCard leaves the template's card to Kueue (policy.Template.AnyCard).
func (t *TemplateWrapper) AnyCard() *TemplateWrapper { t.t.AnyCard = true; return t }
