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
//     contract.RuleQueueNotAllowed, contract.RulePriorityNotAllowed);
//   - a Pod, or a Job's pod template, whose GPU-memory declaration is above
//     what its LocalQueue's ClusterQueue could ever admit
//     (admission.DeclarationCeiling; contract.RuleDeclarationOverQueue):
//     Kueue would hold it forever. The declaration counted is a lower bound
//     of Kueue's, so a rejection is always true: Kueue counts a pod at
//     k8s.io/component-helpers' PodRequests (the containers' sum, or an init
//     container's when larger, plus sidecars and overhead;
//     sigs.k8s.io/kueue@v0.17.0 pkg/workload/workload.go,
//     totalRequestsFromPodSets), each container at its requests, else its
//     limits (pkg/workload/resources.go, UseLimitsAsMissingRequestsInPod);
//     the policy counts the containers' sum or the largest init container.
//     A container that declares nothing counts 0 here: in a job namespace
//     the LimitRange has already given a Pod's containers the default
//     declaration before validation runs (LimitRanger is a mutating
//     admission plugin, and mutation comes before validation), and Kueue
//     counts a Job's at that default too (resources.go, AdjustResources:
//     handlePodLimitRange). A missing declaration is not rejected: it gets
//     the default. A Job with parallelism 0 runs no pod and is not checked.
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
// in is what every namespace's policy reads of the whole policy
// (newAdmissionInputs); nil gives the object's identity only, no
// annotations and no spec (generate's identities).
func admissionPolicy(p *policy.Policy, ns string, in *admissionInputs) Object {
	typeMeta := metav1.TypeMeta{APIVersion: contract.AdmissionAPIVersion, Kind: "ValidatingAdmissionPolicy"}
	if in == nil {
		return object(&admissionv1.ValidatingAdmissionPolicy{TypeMeta: typeMeta, ObjectMeta: meta(p, "", admissionName(ns), nil)}, []string{"access", ns})
	}
	r := in.rights[ns]
	ceilings := in.ceilings
	gpuRes := []string{p.SharesResource(), p.DeclarationResource}
	where := fmt.Sprintf("gpupolicy policy %s, namespace %s", p.Name, ns)

	// What to do instead: the namespace's templates, or its LocalQueues.
	templates := in.templates[ns]
	instead := fmt.Sprintf("label it %s=<one of: %s>", contract.LabelKueueQueue, orNone(r.LocalQueues))
	if len(templates) > 0 {
		instead = fmt.Sprintf("submit it through the WorkflowTemplate %s, or %s", strings.Join(templates, " or "), instead)
	}
	declNote := ""
	if in.jobNamespace[ns] {
		declNote = fmt.Sprintf(" (the LimitRange %s gives every container that declares nothing %s; a pod that uses no GPU declares %s: 0)",
			contract.LimitRangeName, policy.FormatAmount(policy.GPUMemory, p.DefaultGPUMemoryMiB), p.DeclarationResource)
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
	// What Kueue counts of the declaration for one pod, in bytes (a lower
	// bound, see above): requests, else limits, per container.
	declared := func(c string) string {
		at := func(m string) string {
			return fmt.Sprintf("has(%[1]s.resources) && has(%[1]s.resources.%[2]s) && %[3]s in %[1]s.resources.%[2]s", c, m, celString(p.DeclarationResource))
		}
		amount := func(m string) string {
			return fmt.Sprintf("quantity(%s.resources.%s[%s]).asApproximateFloat()", c, m, celString(p.DeclarationResource))
		}
		return fmt.Sprintf("(%s ? %s : (%s ? %s : 0.0))", at("requests"), amount("requests"), at("limits"), amount("limits"))
	}
	vars = append(vars,
		admissionv1.Variable{Name: "runsPods", Expression: "!variables.isWorkload && (object.kind != 'Job' || !has(object.spec.parallelism) || object.spec.parallelism > 0)"},
		admissionv1.Variable{Name: "declaredBytes", Expression: "([variables.podSpec.containers.map(c, " + declared("c") + ").sum()] + " +
			"(has(variables.podSpec.initContainers) ? variables.podSpec.initContainers.map(c, " + declared("c") + ") : [])).max()"},
	)
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
	for i, lq := range r.LocalQueues {
		c, ok := ceilings[r.Queues[i]]
		if !ok {
			continue
		}
		limit := policy.MiBQuantity(c.MiB)
		one := policy.MiBQuantity(1)
		perMiB := one.Value()
		do := fmt.Sprintf("declare at most %s (%s: %s)", policy.FormatAmount(policy.GPUMemory, c.MiB), p.DeclarationResource, policy.MiBString(c.MiB))
		head := fmt.Sprintf("%s (%s): LocalQueue %s ", contract.RuleDeclarationOverQueue, where, lq)
		why := fmt.Sprintf("%s. Kueue never admits a workload above that (\"insufficient quota ... > maximum capacity\"), so it would wait forever. Instead %s, or ask for a larger quota in the policy",
			c.Words(), do)
		validations = append(validations, admissionv1.Validation{
			Expression: fmt.Sprintf("!variables.runsPods || variables.queue != %s || variables.declaredBytes <= %d.0", celString(lq), limit.Value()),
			MessageExpression: celString(head+"admits no pod declaring ") +
				fmt.Sprintf(" + string(int((variables.declaredBytes + %d.0) / %d.0)) + ", perMiB-1, perMiB) + celString(" MiB of GPU memory. "+why),
			Message: head + fmt.Sprintf("admits no pod declaring more than %s of GPU memory. ", policy.FormatAmount(policy.GPUMemory, c.MiB)) + why,
			Reason:  ptrTo(metav1.StatusReasonForbidden),
		})
	}
	create := []admissionv1.OperationType{admissionv1.Create}
	rule := func(group, version, resource string) admissionv1.NamedRuleWithOperations {
		return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: create,
			Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}},
		}}
	}
	vap := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta: typeMeta,
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
