package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/finding"
)

// Kueue's flavorFungibility policies (apis/kueue/v1beta2/clusterqueue_types.go,
// FlavorFungibilityPolicy).
const (
	// MayStopSearch: stop at the first flavor where the job fits, also when
	// it fits only by borrowing (whenCanBorrow) or by preempting
	// (whenCanPreempt).
	MayStopSearch = "MayStopSearch"
	// TryNextFlavor: go on to the next flavor when the job would borrow
	// (whenCanBorrow) or preempt (whenCanPreempt) on this one.
	TryNextFlavor = "TryNextFlavor"
)

// FlavorFungibility is a ClusterQueue's flavorFungibility: what a job that
// may land on several of the queue's cards does when it fits one only by
// borrowing or by preempting. An empty field is Kueue v0.17's default
// (kubebuilder defaults of FlavorFungibility): whenCanBorrow MayStopSearch,
// whenCanPreempt TryNextFlavor.
type FlavorFungibility struct {
	WhenCanBorrow  string `json:"whenCanBorrow"`
	WhenCanPreempt string `json:"whenCanPreempt"`
}

// Fungibility is the queue's flavorFungibility with Kueue's defaults filled
// in.
func (q ClusterQueue) Fungibility() FlavorFungibility {
	f := q.FlavorFungibility
	if f.WhenCanBorrow == "" {
		f.WhenCanBorrow = MayStopSearch
	}
	if f.WhenCanPreempt == "" {
		f.WhenCanPreempt = TryNextFlavor
	}
	return f
}

// PodNodeSelector is the nodeSelector render writes on a template's pod:
// its card's nodeLabels when the queue has several cards and the template
// pins its card (not AnyCard); nil otherwise (with one card Kueue injects
// the flavor's nodeLabels at admission; with AnyCard the choice is
// Kueue's).
func (p *Policy) PodNodeSelector(t Template) map[string]string {
	q, ok := p.Queues[t.Queue]
	if !ok || t.AnyCard || len(q.Flavors) < 2 || len(p.Cards[t.Card].NodeLabels) == 0 {
		return nil
	}
	return p.Cards[t.Card].NodeLabels
}

// CardChoice lists the queue's cards, in the order Kueue tries them
// (FlavorNames), whose flavor a pod with the given nodeSelector may be
// assigned: Kueue v0.17's flavorassigner.flavorSelector keeps only the
// selector's keys that some flavor of the resource group uses as a node
// label (ResourceGroup.LabelKeys), and checkFlavorForPodSets matches what is
// left against the flavor's nodeLabels as if they were a node's labels. A
// card without nodeLabels matches a pod whose kept selector is empty.
func (p *Policy) CardChoice(queue string, selector map[string]string) []string {
	q, ok := p.Queues[queue]
	if !ok {
		return nil
	}
	names := q.FlavorNames()
	keys := map[string]bool{}
	for _, f := range names {
		for k := range p.Cards[f].NodeLabels {
			keys[k] = true
		}
	}
	var out []string
	for _, f := range names {
		labels := p.Cards[f].NodeLabels
		match := true
		for k, v := range selector {
			if keys[k] && labels[k] != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, f)
		}
	}
	return out
}

// TemplateCards lists the cards Kueue may assign a template's jobs
// (CardChoice of its PodNodeSelector), in the order it tries them.
func (p *Policy) TemplateCards(t Template) []string {
	return p.CardChoice(t.Queue, p.PodNodeSelector(t))
}

// RuleCardAnyFlavor: a template that pins a card without nodeLabels in a
// queue with several cards. Render can put no nodeSelector on its pod, so
// Kueue's flavor assigner offers it every flavor of the queue
// (checkFlavorForPodSets matches an empty selector), and it lands on the
// first card, in the queue's order, where it fits. A warning: the policy is
// valid, and explain models where the jobs land; but the pin is not one.
var RuleCardAnyFlavor = finding.Register(finding.Rule{ID: "card-any-flavor", Verb: finding.Vet, Severity: finding.Warning,
	Reason: "in a queue with several cards a template's card pins it only through the card's nodeLabels: a card without them lets Kueue put the job on any card of the queue, the first where it fits"})

// Warnings are the findings vet reports without refusing the policy
// (RuleCardAnyFlavor, RuleCohortUndeclared), sorted by position.
func (p *Policy) Warnings() finding.List {
	c := checker{p: p}
	c.undeclaredCohorts()
	for _, n := range p.TemplateNames() {
		t := p.Templates[n]
		q, ok := p.Queues[t.Queue]
		card, okC := p.Cards[t.Card]
		if !ok || !okC || t.AnyCard || len(q.Flavors) < 2 || len(card.NodeLabels) > 0 {
			continue
		}
		choice := p.TemplateCards(t)
		c.add(RuleCardAnyFlavor, []string{"templates", n, "card"},
			"template %s names card %s, which has no nodeLabels, in queue %s with cards %s: its pod carries no node selector, so Kueue "+
				"(flavorassigner.findFlavorForPodSets) may assign it any of %s, the first in that order where it fits, borrowing or preempting "+
				"there as the queue's flavorFungibility says (%s). Give %s nodeLabels to pin it, or set anyCard: true to say it may run on any",
			n, t.Card, t.Queue, strings.Join(q.FlavorNames(), ", "), strings.Join(choice, ", "), fungibilityWords(q.Fungibility()), t.Card)
	}
	c.ds.SortByPos()
	return c.ds
}

// fungibilityWords is "whenCanBorrow MayStopSearch, whenCanPreempt
// TryNextFlavor".
func fungibilityWords(f FlavorFungibility) string {
	return "whenCanBorrow " + f.WhenCanBorrow + ", whenCanPreempt " + f.WhenCanPreempt
}

// wireFlavors is a queue's flavors as the policy writes them: the map and
// its keys in declaration order (CUE keeps it in its JSON).
type wireFlavors struct {
	m     map[string]wireFlavor
	order []string
}

func (w *wireFlavors) UnmarshalJSON(b []byte) error {
	strict := json.NewDecoder(bytes.NewReader(b))
	strict.DisallowUnknownFields()
	if err := strict.Decode(&w.m); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("flavors: key %v is not a string", tok)
		}
		w.order = append(w.order, key)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	if len(w.order) != len(w.m) || !slices.Equal(slices.Sorted(slices.Values(w.order)), slices.Sorted(maps.Keys(w.m))) {
		return fmt.Errorf("flavors: duplicate keys")
	}
	return nil
}
