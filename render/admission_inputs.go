package render

import (
	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// admissionInputs is what every namespace's ValidatingAdmissionPolicy
// reads of the whole policy, computed once per render rather than once per
// namespace (a policy with 1,000 namespaces and 100 templates otherwise
// walks every queue and template 1,000 times).
type admissionInputs struct {
	// ceilings are the declaration ceilings by ClusterQueue
	// (admission.DeclarationCeilings).
	ceilings map[string]admission.Ceiling
	// rights are what each GPU namespace may use (policy.AllowedEach).
	rights map[string]policy.Rights
	// templates are the WorkflowTemplate names (variants, in
	// policy.Variants order) of each namespace.
	templates map[string][]string
	// jobNamespace is true for the namespaces of policy.JobNamespaces.
	jobNamespace map[string]bool
}

func newAdmissionInputs(p *policy.Policy) *admissionInputs {
	in := &admissionInputs{
		ceilings:     admission.DeclarationCeilings(p),
		rights:       p.AllowedEach(),
		templates:    map[string][]string{},
		jobNamespace: map[string]bool{},
	}
	for _, v := range p.Variants() {
		in.templates[v.Template.Namespace] = append(in.templates[v.Template.Namespace], v.Name)
	}
	for _, ns := range p.JobNamespaces() {
		in.jobNamespace[ns] = true
	}
	return in
}
