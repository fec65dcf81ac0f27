package drift

import (
	"fmt"

	"github.com/gpupolicy/gpupolicy/internal/finding"
)

// RulePinDrift is drift's rule for the git side: the render at the pin
// against HEAD (drift/live has the cluster's rules).
var (
	RulePinDrift = finding.Register(finding.Rule{ID: "pin-drift", Verb: finding.Drift, Severity: finding.Warning,
		Reason: "the cluster syncs the render at its pin, not at HEAD: a difference is policy merged but not deployed (the stale pin that dropped every GPU-memory declaration)"})
	RuleRenderStale = finding.Register(finding.Rule{ID: "render-stale", Verb: finding.Drift, Severity: finding.Warning,
		Reason: "HEAD's deploy/ENV is what HEAD's policy renders: drift compares committed renders, so a policy change committed without its render shows no drift until it is rendered"})
)

// Findings are the differences as findings of a rule, one per difference,
// in the differences' order: what differs, on which side, and its
// consequence when the model knows it.
func Findings(rule finding.Rule, ds []Difference, sides Sides) finding.List {
	out := finding.List{}
	for _, d := range ds {
		var msg string
		switch d.Change {
		case Added:
			msg = fmt.Sprintf("%s is missing at %s (only %s has it)", d.Object(), sides.From, sides.To)
		case Removed:
			msg = fmt.Sprintf("%s is only at %s (%s does not have it)", d.Object(), sides.From, sides.To)
		default:
			msg = fmt.Sprintf("%s %s: %s at %s, %s at %s", d.Object(), d.Path, valueText(d.From), sides.From, valueText(d.To), sides.To)
		}
		if d.Consequence != "" {
			msg += ". " + d.Consequence
		}
		f := rule.New(msg)
		f.Object = d.Object()
		out = append(out, f)
	}
	return out
}
