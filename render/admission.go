package render

import (
	"fmt"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// The admission objects: per namespace where the policy's GPU workloads run,
// a ValidatingAdmissionPolicy (CEL, evaluated by the API server itself, no
// webhook) and its binding, that reject on create
//
//   - a Pod, or a Job's pod template, that asks for a share or declares GPU
//     memory without a LocalQueue (rule contract.RuleGPUOutsideKueue): Kueue
//     never sees it, so it holds what every quota believes is free;
//   - a Pod, Job or Kueue Workload naming a LocalQueue or a
//     WorkloadPriorityClass the namespace may not use (policy.Allowed;
//     contract.RuleQueueNotAllowed, contract.RulePriorityNotAllowed).
//
// Only creates are checked: what already runs is left alone (drift --live
// reports it), and Kueue's own updates of what it admitted never fail.

// admissionName is the name of a namespace's policy and binding.
func admissionName(ns string) string { return contract.AdmissionPolicyPrefix + ns }

// namespaceSelector selects exactly one namespace by its name label, which
// the API server sets on every namespace.
func namespaceSelector(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{ns},
	}}}
}

// celList is a CEL list literal of strings.
func celList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// celString is a CEL string literal.
func celString(s string) string { return strconv.Quote(s) }

func orNone(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	return strings.Join(vs, ", ")
}

// admissionPolicy renders one namespace's ValidatingAdmissionPolicy.
func admissionPolicy(p *policy.Policy, ns string) Object {
	r := p.Allowed(ns)
	gpuRes := []string{p.SharesResource(), p.DeclarationResource}
	where := fmt.Sprintf("gpupolicy policy %s, namespace %s", p.Name, ns)

	// What to do instead: the namespace's templates, or its LocalQueues.
	var templates []string
	for _, v := range p.Variants() {
		if v.Template.Namespace == ns {
			templates = append(templates, v.Name)
		}
	}
	instead := fmt.Sprintf("label it %s=<one of: %s>", contract.LabelKueueQueue, orNone(r.LocalQueues))
	if len(templates) > 0 {
		instead = fmt.Sprintf("submit it through the WorkflowTemplate %s, or %s", strings.Join(templates, " or "), instead)
	}
	declNote := ""
	for _, jns := range p.JobNamespaces() {
		if jns == ns {
			declNote = fmt.Sprintf(" (the LimitRange %s gives every container that declares nothing %s; a pod that uses no GPU declares %s: 0)",
				contract.LimitRangeName, policy.FormatAmount(policy.GPUMemory, p.DefaultGPUMemoryMiB), p.DeclarationResource)
		}
	}

	quantityOver := func(m string) string {
		return fmt.Sprintf("(has(c.resources.%[1]s) && %[2]s.exists(r, r in c.resources.%[1]s && quantity(c.resources.%[1]s[r]).isGreaterThan(quantity('0'))))", m, celList(gpuRes))
	}
	label := func(key string) string {
		return fmt.Sprintf("has(object.metadata.labels) && %[1]s in object.metadata.labels ? object.metadata.labels[%[1]s] : ''", celString(key))
	}
	vars := []admissionv1.Variable{
		{Name: "isWorkload", Expression: "object.kind == 'Workload'"},
		{Name: "podSpec", Expression: "object.kind == 'Pod' ? object.spec : object.spec.template.spec"},
		{Name: "containers", Expression: "variables.podSpec.containers + (has(variables.podSpec.initContainers) ? variables.podSpec.initContainers : [])"},
		{Name: "asksGPU", Expression: "!variables.isWorkload && variables.containers.exists(c, has(c.resources) && (" + quantityOver("requests") + " || " + quantityOver("limits") + "))"},
		{Name: "queue", Expression: "variables.isWorkload ? (has(object.spec.queueName) ? object.spec.queueName : '') : (" + label(contract.LabelKueueQueue) + ")"},
		{Name: "priority", Expression: "variables.isWorkload ? (has(object.spec.priorityClassRef) && object.spec.priorityClassRef.kind == 'WorkloadPriorityClass' ? object.spec.priorityClassRef.name : '') : (" + label(contract.LabelKueuePriority) + ")"},
	}
	validations := []admissionv1.Validation{
		{
			Expression: "!variables.asksGPU || variables.queue != ''",
			Message: fmt.Sprintf("%s (%s): a pod that asks for %s (a share of the card) or declares %s must name a LocalQueue: outside Kueue it holds what every quota believes is free%s; %s",
				contract.RuleGPUOutsideKueue, where, p.SharesResource(), p.DeclarationResource, declNote, instead),
			Reason: ptrTo(metav1.StatusReasonForbidden),
		},
		{
			Expression: "variables.queue == '' || variables.queue in " + celList(r.LocalQueues),
			MessageExpression: celString(fmt.Sprintf("%s (%s): LocalQueue ", contract.RuleQueueNotAllowed, where)) + " + variables.queue + " +
				celString(fmt.Sprintf(" is not one this namespace may use; use one of: %s", orNone(r.LocalQueues))),
			Message: fmt.Sprintf("%s (%s): this namespace may use only the LocalQueues %s", contract.RuleQueueNotAllowed, where, orNone(r.LocalQueues)),
			Reason:  ptrTo(metav1.StatusReasonForbidden),
		},
		{
			Expression: "variables.priority == '' || variables.priority in " + celList(r.Priorities),
			MessageExpression: celString(fmt.Sprintf("%s (%s): priority ", contract.RulePriorityNotAllowed, where)) + " + variables.priority + " +
				celString(fmt.Sprintf(" is not one this namespace may use (from there it could evict what the policy protects); use one of: %s", orNone(r.Priorities))),
			Message: fmt.Sprintf("%s (%s): this namespace may use only the priorities %s", contract.RulePriorityNotAllowed, where, orNone(r.Priorities)),
			Reason:  ptrTo(metav1.StatusReasonForbidden),
		},
	}
	create := []admissionv1.OperationType{admissionv1.Create}
	rule := func(group, version, resource string) admissionv1.NamedRuleWithOperations {
		return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: create,
			Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}},
		}}
	}
	vap := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: contract.AdmissionAPIVersion, Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: meta(p, "", admissionName(ns), map[string]string{
			contract.AnnotationDescription: fmt.Sprintf("in %s: no GPU pod outside Kueue; LocalQueues %s; priorities %s",
				ns, orNone(r.LocalQueues), orNone(r.Priorities)),
		}),
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptrTo(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: namespaceSelector(ns),
				ResourceRules: []admissionv1.NamedRuleWithOperations{
					rule("", "v1", "pods"),
					rule("batch", "v1", "jobs"),
					rule("kueue.x-k8s.io", "v1beta2", "workloads"),
				},
			},
			Variables:   vars,
			Validations: validations,
		},
	}
	return object(vap, []string{"access", ns})
}

// admissionBinding binds a namespace's policy, denying what it rejects.
func admissionBinding(p *policy.Policy, ns string) Object {
	b := &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: contract.AdmissionAPIVersion, Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: meta(p, "", admissionName(ns), nil),
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        admissionName(ns),
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources:    &admissionv1.MatchResources{NamespaceSelector: namespaceSelector(ns)},
		},
	}
	return object(b, []string{"access", ns})
}

// KueueConfigFragment is the part of Kueue's own configuration (the
// controller manager's Configuration, config.kueue.x-k8s.io/v1beta2) that
// backs the admission policies, for the admin who installs Kueue: Kueue
// manages every Job and Pod in the policy's GPU namespaces even without a
// queue name (so one that slips past admission is suspended, not run), and
// none elsewhere. The pod integration must be on for the always-on models'
// pods and the Argo steps.
func KueueConfigFragment(p *policy.Policy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Kueue Configuration fragment for gpupolicy policy %s.\n", p.Name)
	b.WriteString("manageJobsWithoutQueueName: true\n")
	b.WriteString("managedJobsNamespaceSelector:\n  matchExpressions:\n  - key: kubernetes.io/metadata.name\n    operator: In\n    values: [")
	b.WriteString(strings.Join(p.GPUNamespaces(), ", "))
	b.WriteString("]\nintegrations:\n  frameworks:\n  - batch/job\n  - pod\n")
	return b.String()
}
