package render

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// The API server's CEL environment for ValidatingAdmissionPolicy, as its
// validating admission plugin builds it (k8s.io/apiserver
// pkg/admission/plugin/policy/validating, compilePolicy): the base
// environment at the default compatibility version with strict cost,
// object/oldObject/request/namespace declared, the authorizer for
// variables and validations but not for messageExpressions. Expressions
// compile in NewExpressions mode, the stricter one the API server applies
// to a policy when it is created.
var (
	celVars     = plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	celMessages = plugincel.OptionalVariableDeclarations{}
)

func newCELCompiler(t *testing.T) *plugincel.CompositedCompiler {
	t.Helper()
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// compileErrors compiles every CEL expression of a policy (variables in
// order, then each validation's expression and messageExpression) and
// returns the failures, each naming its field.
func compileErrors(t *testing.T, vap *admissionv1.ValidatingAdmissionPolicy) []string {
	t.Helper()
	c := newCELCompiler(t)
	var errs []string
	for i, v := range vap.Spec.Variables {
		if res := c.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, celVars, environment.NewExpressions); res.Error != nil {
			errs = append(errs, fmt.Sprintf("spec.variables[%d] (%s): %v", i, v.Name, res.Error))
		}
	}
	for i, v := range vap.Spec.Validations {
		if res := c.CompileCELExpression(&validating.ValidationCondition{Expression: v.Expression}, celVars, environment.NewExpressions); res.Error != nil {
			errs = append(errs, fmt.Sprintf("spec.validations[%d].expression: %v", i, res.Error))
		}
		if v.MessageExpression == "" {
			continue
		}
		if res := c.CompileCELExpression(&validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}, celMessages, environment.NewExpressions); res.Error != nil {
			errs = append(errs, fmt.Sprintf("spec.validations[%d].messageExpression: %v", i, res.Error))
		}
	}
	for i, m := range vap.Spec.MatchConditions {
		if res := c.CompileCELExpression(&validating.ValidationCondition{Expression: m.Expression}, celVars, environment.NewExpressions); res.Error != nil {
			errs = append(errs, fmt.Sprintf("spec.matchConditions[%d]: %v", i, res.Error))
		}
	}
	return errs
}

// renderedPolicies returns the ValidatingAdmissionPolicies a render wrote,
// decoded from the files' bytes, by namespace.
func renderedPolicies(t *testing.T, p *policy.Policy) map[string]*admissionv1.ValidatingAdmissionPolicy {
	t.Helper()
	r, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*admissionv1.ValidatingAdmissionPolicy{}
	for _, ns := range p.GPUNamespaces() {
		b, ok := r.Files["validatingadmissionpolicy_"+contract.AdmissionPolicyPrefix+ns+".yaml"]
		if !ok {
			t.Fatalf("no admission policy rendered for %s", ns)
		}
		var vap admissionv1.ValidatingAdmissionPolicy
		if err := yaml.UnmarshalStrict(b, &vap); err != nil {
			t.Fatal(err)
		}
		out[ns] = &vap
	}
	return out
}

// Every CEL expression the render emits compiles in the API server's
// environment, so a typo fails here, not on a cluster.
func TestAdmissionCELCompiles(t *testing.T) {
	p := loadLab(t)
	vaps := renderedPolicies(t, p)
	for ns, vap := range vaps {
		if len(vap.Spec.Variables) == 0 || len(vap.Spec.Validations) == 0 {
			t.Fatalf("%s: nothing to compile", ns)
		}
		for _, e := range compileErrors(t, vap) {
			t.Errorf("%s: %s", vap.Name, e)
		}
	}
	// The check can fail: a misspelt variable, a misspelt function and a
	// message of the wrong type are each caught.
	for _, tc := range []struct {
		edit func(*admissionv1.ValidatingAdmissionPolicy)
		want string
	}{
		{func(v *admissionv1.ValidatingAdmissionPolicy) {
			v.Spec.Validations[0].Expression = strings.Replace(v.Spec.Validations[0].Expression, "variables.queue", "variables.queu", 1)
		}, "spec.validations[0].expression"},
		{func(v *admissionv1.ValidatingAdmissionPolicy) {
			last := len(v.Spec.Variables) - 1
			v.Spec.Variables[last].Expression = strings.Replace(v.Spec.Variables[last].Expression, "asApproximateFloat", "asApproximateFlaot", 1)
		}, "spec.variables"},
		{func(v *admissionv1.ValidatingAdmissionPolicy) {
			v.Spec.Validations[1].MessageExpression = "variables.queue == ''"
		}, "spec.validations[1].messageExpression"},
	} {
		vap := vaps["experiments"].DeepCopy()
		tc.edit(vap)
		errs := compileErrors(t, vap)
		if len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), tc.want) {
			t.Errorf("a broken %s compiled: %v", tc.want, errs)
		}
	}
}

// admit runs a rendered policy over an object as the API server's
// validating admission plugin does on create (its compiled validator, the
// same cost budget), and returns the denials' messages: none when the
// object is admitted.
func admit(t *testing.T, vap *admissionv1.ValidatingAdmissionPolicy, obj runtime.Object, gvk schema.GroupVersionKind, resource string) []string {
	t.Helper()
	if errs := compileErrors(t, vap); len(errs) > 0 {
		t.Fatal(errs)
	}
	c := newCELCompiler(t)
	vars := make([]plugincel.NamedExpressionAccessor, len(vap.Spec.Variables))
	for i, v := range vap.Spec.Variables {
		vars[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	c.CompileAndStoreVariables(vars, celVars, environment.StoredExpressions)
	conds := make([]plugincel.ExpressionAccessor, len(vap.Spec.Validations))
	msgs := make([]plugincel.ExpressionAccessor, len(vap.Spec.Validations))
	for i, v := range vap.Spec.Validations {
		conds[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			msgs[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	val := validating.NewValidator(
		c.CompileCondition(conds, celVars, environment.StoredExpressions), nil,
		c.CompileCondition(nil, celVars, environment.StoredExpressions),
		c.CompileCondition(msgs, celMessages, environment.StoredExpressions),
		vap.Spec.FailurePolicy, nil)
	// The API server hands admission the object converted to the version
	// matched, its kind set (admission.ConvertVersionedAttributes).
	obj = obj.DeepCopyObject()
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	meta := obj.(metav1.Object)
	gvr := gvk.GroupVersion().WithResource(resource)
	attrs := admission.NewAttributesRecord(obj, nil, gvk, meta.GetNamespace(), meta.GetName(), gvr, "", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "alice"})
	res := val.Validate(context.Background(), gvr, &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk, VersionedObject: admission.NewLazyObject(obj)},
		nil, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: meta.GetNamespace()}}, celconfig.RuntimeCELCostBudget, nil)
	var denied []string
	for _, d := range res.Decisions {
		switch {
		case d.Evaluation == validating.EvalError:
			t.Fatalf("%s: evaluation error: %s", meta.GetName(), d.Message)
		case d.Action == validating.ActionDeny:
			denied = append(denied, d.Message)
		}
	}
	return denied
}

var (
	podGVK = corev1.SchemeGroupVersion.WithKind("Pod")
	jobGVK = batchv1.SchemeGroupVersion.WithKind("Job")
)

// container declares GPU memory in requests and limits ("" declares none;
// limitsOnly leaves requests out, as Kueue then counts the limit).
func container(p *policy.Policy, name, declare string, limitsOnly bool) corev1.Container {
	rl := corev1.ResourceList{corev1.ResourceName(p.SharesResource()): resource.MustParse("1")}
	if declare != "" {
		rl[corev1.ResourceName(p.DeclarationResource)] = resource.MustParse(declare)
	}
	c := corev1.Container{Name: name, Image: "lab.local/job:latest", Resources: corev1.ResourceRequirements{Limits: rl}}
	if !limitsOnly {
		c.Resources.Requests = rl.DeepCopy()
	}
	return c
}

func labelled(ns, queue, priority string) map[string]string {
	l := map[string]string{}
	if queue != "" {
		l[contract.LabelKueueQueue] = queue
	}
	if priority != "" {
		l[contract.LabelKueuePriority] = priority
	}
	return l
}

// The API server's evaluation of the rendered policies: a GPU step whose
// declaration is above what its queue could ever admit is rejected with
// the rule, the queue's ceiling and what to declare instead; at the
// ceiling, or declaring nothing (the LimitRange default applies), it
// passes. The declaration counted is the containers' sum, or an init
// container's alone, from requests or else limits. The rules that were
// there before still hold.
func TestAdmissionPolicyEvaluates(t *testing.T) {
	p := loadLab(t)
	vaps := renderedPolicies(t, p)
	pod := func(ns, name string, labels map[string]string, cs []corev1.Container, inits ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{Containers: cs, InitContainers: inits}}
	}
	job := func(name string, parallelism int32, declare string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "experiments", Labels: labelled("experiments", "gpu-general", "batch")},
			Spec: batchv1.JobSpec{Parallelism: &parallelism, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{container(p, "main", declare, false)}}}}}
	}
	exp := labelled("experiments", "gpu-general", "batch")
	llm := labelled("llm", "gpu-large-model", "on-demand-llm")
	for _, tc := range []struct {
		name string
		ns   string
		obj  runtime.Object
		gvk  schema.GroupVersionKind
		// want: the substrings of the one denial; none: admitted.
		want []string
	}{
		{"at the general queue's ceiling", "experiments", pod("experiments", "at-ceiling", exp, []corev1.Container{container(p, "main", "16311Mi", false)}), podGVK, nil},
		{"one MiB above it", "experiments", pod("experiments", "above", exp, []corev1.Container{container(p, "main", "16312Mi", false)}), podGVK,
			[]string{contract.RuleDeclarationOverQueue + " (gpupolicy policy lab, namespace experiments)", "LocalQueue gpu-general admits no pod declaring 16312 MiB",
				"ClusterQueue gpu-general can hold at most 16,311 MiB on rtx-5060-ti", "insufficient quota", "declare at most 16,311 MiB (gpupolicy.dev/gpu-memory: 16311Mi)"}},
		{"one byte above it", "experiments", pod("experiments", "byte", exp, []corev1.Container{container(p, "main", fmt.Sprint(16311<<20+1), false)}), podGVK,
			[]string{"admits no pod declaring 16312 MiB"}},
		{"two containers, 9,000 + 8,000 MiB", "experiments", pod("experiments", "sum", exp, []corev1.Container{container(p, "main", "9000Mi", false), container(p, "side", "8000Mi", false)}), podGVK,
			[]string{"declaring 17000 MiB"}},
		{"an init container alone above it", "experiments", pod("experiments", "init", exp, []corev1.Container{container(p, "main", "1Gi", false)}, container(p, "prepare", "17Gi", false)), podGVK,
			[]string{"declaring 17408 MiB"}},
		{"an init container below the containers' sum", "experiments", pod("experiments", "init-small", exp, []corev1.Container{container(p, "main", "8Gi", false), container(p, "side", "7Gi", false)}, container(p, "prepare", "15Gi", false)), podGVK, nil},
		{"limits only", "experiments", pod("experiments", "limits", exp, []corev1.Container{container(p, "main", "16Gi", true)}), podGVK,
			[]string{"declaring 16384 MiB"}},
		{"no declaration: the LimitRange default", "experiments", pod("experiments", "undeclared", exp, []corev1.Container{container(p, "main", "", false)}), podGVK, nil},
		{"a Job above it", "experiments", job("big-job", 1, "20Gi"), jobGVK, []string{contract.RuleDeclarationOverQueue, "declaring 20480 MiB"}},
		{"a Job of parallelism 0 runs no pod", "experiments", job("idle-job", 0, "20Gi"), jobGVK, nil},
		{"the large-model queue's borrowingLimit", "llm", pod("llm", "qwen", llm, []corev1.Container{container(p, "server", "12200Mi", false)}), podGVK, nil},
		{"above the borrowingLimit", "llm", pod("llm", "qwen-14b", llm, []corev1.Container{container(p, "server", "12201Mi", false)}), podGVK,
			[]string{"LocalQueue gpu-large-model admits no pod declaring 12201 MiB", "nominalQuota 0 MiB plus its borrowingLimit 12,200 MiB in cohort gpu", "declare at most 12,200 MiB"}},
		// The rules from before.
		{"a GPU pod without a LocalQueue", "experiments", pod("experiments", "by-hand", nil, []corev1.Container{container(p, "main", "8Gi", false)}), podGVK,
			[]string{contract.RuleGPUOutsideKueue, "submit it through the WorkflowTemplate"}},
		{"always-on in experiments", "experiments", pod("experiments", "sneaky", labelled("experiments", "gpu-general", "always-on"), []corev1.Container{container(p, "main", "8Gi", false)}), podGVK,
			[]string{contract.RulePriorityNotAllowed, "priority always-on is not one this namespace may use"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gvr := "pods"
			if tc.gvk == jobGVK {
				gvr = "jobs"
			}
			denied := admit(t, vaps[tc.ns], tc.obj, tc.gvk, gvr)
			if tc.want == nil {
				if len(denied) > 0 {
					t.Fatalf("denied: %q", denied)
				}
				return
			}
			if len(denied) != 1 {
				t.Fatalf("denials %q, want one", denied)
			}
			for _, w := range tc.want {
				if !strings.Contains(denied[0], w) {
					t.Errorf("denial %q does not say %q", denied[0], w)
				}
			}
		})
	}
}
