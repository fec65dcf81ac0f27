package admissiontest

import "github.com/gpupolicy/gpupolicy/internal/policy"

// Cohort adds a Kueue Cohort object: its parent ("" for a root) and its
// own quotas, one card each.
func (w *PolicyWrapper) Cohort(name, parent string, flavors ...*FlavorWrapper) *PolicyWrapper {
	if w.p.Cohorts == nil {
		w.p.Cohorts = map[string]policy.Cohort{}
	}
	co := policy.Cohort{Name: name, Parent: parent, Flavors: map[string]policy.FlavorQuotas{}}
	for _, f := range flavors {
		co.Flavors[f.card] = f.f
	}
	w.p.Cohorts[name] = co
	return w
}
