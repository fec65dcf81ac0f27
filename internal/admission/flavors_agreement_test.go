package admission

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// TestFlavorsAgreeWithEnumeration is TestAgreesWithEnumeration on
// generated policies whose templates may land on several cards (anyCard,
// random flavorFungibility): the components that join the cards such a
// template may take (cardGroups) give the rows, outlooks, findings and
// bounded search of the whole-policy enumeration.
func TestFlavorsAgreeWithEnumeration(t *testing.T) {
	seeds, multi := 200, 0
	fung := []string{policy.MayStopSearch, policy.TryNextFlavor}
	for i := 0; i < seeds; i++ {
		r := rand.New(rand.NewSource(int64(1000 + i)))
		p := randomPolicy(r, 1000+i)
		p.Name = fmt.Sprintf("flavors-%d", i)
		for n, tm := range p.Templates {
			tm.AnyCard = r.Intn(3) > 0
			p.Templates[n] = tm
		}
		for n, q := range p.Queues {
			q.FlavorFungibility = policy.FlavorFungibility{WhenCanBorrow: fung[r.Intn(2)], WhenCanPreempt: fung[r.Intn(2)]}
			p.Queues[n] = q
		}
		for _, tm := range p.Templates {
			if len(p.TemplateCards(tm)) > 1 {
				multi++
				break
			}
		}
		t.Run(p.Name, func(t *testing.T) { agreesWithEnumeration(t, p) })
	}
	if multi < seeds/5 {
		t.Errorf("only %d of %d policies have a template on several cards", multi, seeds)
	}
}
