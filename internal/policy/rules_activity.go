package policy

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// RuleLastActivity: where status reads an on-demand service's last request.
var RuleLastActivity = vetRule("last-activity",
	"an on-demand service's last request is read from exactly one annotation or label the policy names, a key Kubernetes accepts, in a form its value can hold (a label value has no colons: Unix seconds, not RFC 3339)")

// lastActivity checks each service's lastActivity (schema #LastActivity):
// on an on-demand service (the schema's conditional field does not close
// it on always-on ones), exactly one of annotation and label, a qualified key (the syntax of
// k8s.io/apimachinery validation.IsQualifiedName, which the API server
// applies to both), and a label written in Unix seconds, since an RFC 3339
// time has colons a label value cannot hold (validation.IsValidLabelValue).
func (c *checker) lastActivity() {
	for _, n := range c.p.ServiceNames() {
		la := c.p.Services[n].LastActivity
		if !la.Known() {
			continue
		}
		base := []string{"services", n, "lastActivity"}
		if s := c.p.Services[n]; s.Mode != OnDemand {
			c.add(RuleLastActivity, base, "service %q is %s: only an on-demand service scales to zero after its last request, so only it has a lastActivity",
				n, s.Mode)
			continue
		}
		if la.Annotation != "" && la.Label != "" {
			c.add(RuleLastActivity, append(base, "label"), "service %q: lastActivity names both annotation %q and label %q: name the one its idle scaler writes",
				n, la.Annotation, la.Label)
			continue
		}
		field, key := "annotation", la.Annotation
		if la.Label != "" {
			field, key = "label", la.Label
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			c.add(RuleLastActivity, append(base, field), "service %q: lastActivity.%s %q is not a Kubernetes key: %s",
				n, field, key, strings.Join(errs, "; "))
		}
		if la.Label != "" && la.Format != TimeUnix {
			c.add(RuleLastActivity, append(base, "label"), "service %q: lastActivity.label %q is read as an RFC 3339 time, which a label value cannot hold (no colons): write it in Unix seconds (format: \"unix\") or use an annotation",
				n, la.Label)
		}
	}
}
