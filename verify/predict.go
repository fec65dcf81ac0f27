package verify

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// AdmissionPredictor runs the admission model (the analysis behind
// `gpupolicy explain`) once over the policy and answers from its capacity
// rows: the row of the template (or of the template it is the cache-free
// variant of, when the variant has no row of its own), the priority, and
// the service state read from the cluster.
func AdmissionPredictor(p *policy.Policy) (Predictor, error) {
	rep, err := admission.Explain(p)
	if err != nil {
		return nil, fmt.Errorf("admission model: %w", err)
	}
	base := PredictorFromExplain(p, rep)
	bySet := map[string]Predictor{}
	return func(template, priority string, st State) (Prediction, error) {
		if len(st.AlwaysOnAbsent) == 0 {
			return base(template, priority, st)
		}
		key := strings.Join(st.AlwaysOnAbsent, ",")
		pr, ok := bySet[key]
		if !ok {
			q := WithoutServices(p, st.AlwaysOnAbsent)
			rep, err := admission.Explain(q)
			if err != nil {
				return Prediction{}, fmt.Errorf("admission model without %s: %w", key, err)
			}
			pr = PredictorFromExplain(q, rep)
			bySet[key] = pr
		}
		out, err := pr(template, priority, st)
		out.WithoutAlwaysOn = slices.Clone(st.AlwaysOnAbsent)
		return out, err
	}, nil
}

// WithoutServices is the policy with the named services left out: what
// the admission model predicts when they hold no quota on the cluster. The
// policy itself is not changed.
func WithoutServices(p *policy.Policy, names []string) *policy.Policy {
	q := *p
	q.Services = maps.Clone(p.Services)
	for _, n := range names {
		delete(q.Services, n)
	}
	return &q
}

// PredictorFromExplain answers from an admission report.
func PredictorFromExplain(p *policy.Policy, rep *admission.Report) Predictor {
	base := map[string]string{}
	for _, v := range p.Variants() {
		base[v.Name] = v.Template.Name
	}
	return func(template, priority string, st State) (Prediction, error) {
		find := func(name string) *admission.Capacity {
			for i := range rep.Capacity {
				c := &rep.Capacity[i]
				if c.Template != name || c.Priority != priority {
					continue
				}
				match := true
				for svc, s := range c.State {
					if st.Services[svc] != s {
						match = false
						break
					}
				}
				if match {
					return c
				}
			}
			return nil
		}
		c := find(template)
		if c == nil && base[template] != "" && base[template] != template {
			c = find(base[template])
		}
		if c == nil {
			return Prediction{}, fmt.Errorf("the admission model has no row for %s at %s priority with %s", template, priority, st.Label())
		}
		pr := Prediction{
			Template: template, Priority: priority, State: maps.Clone(c.State),
			Admitted: int(c.Admitted), QuotaAdmits: int(c.QuotaAdmits), BoundBy: c.BoundBy,
			Binding: slices.Clone(c.Binding), Margin: maps.Clone(c.Margin),
			Source: "admission model (" + rep.Model + ")",
		}
		if c.Lock != nil {
			pr.Lock, pr.LockSize = c.Lock.Name, int(c.Lock.Size)
		}
		for _, f := range rep.Findings {
			if f.Rule == admission.RuleStarvation.ID && mentions(f, priority) {
				pr.Explain = append(pr.Explain, f.Message)
			}
		}
		return pr, nil
	}
}

// mentions reports whether a finding is about a priority: its path names
// the priority, or its message quotes it as a word.
func mentions(f finding.Finding, priority string) bool {
	if strings.Contains(f.Path, priority) {
		return true
	}
	for _, w := range strings.FieldsFunc(f.Message, func(r rune) bool {
		return !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		if w == priority {
			return true
		}
	}
	return false
}
