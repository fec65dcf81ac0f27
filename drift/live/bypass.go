package live

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// The rules of what got around the policy: what the API server's admission
// policies (render's ValidatingAdmissionPolicies) reject now, found on the
// cluster because it came in before them, or while they were unbound.
var (
	RuleGPUOutsideKueue = finding.Register(finding.Rule{ID: contract.RuleGPUOutsideKueue, Verb: finding.Drift, Severity: finding.Error,
		Reason: "a pod that holds a share or declares GPU memory without a LocalQueue is outside every quota: Kueue goes on admitting jobs as if the card were free"})
	RulePriorityNotAllowed = finding.Register(finding.Rule{ID: contract.RulePriorityNotAllowed, Verb: finding.Drift, Severity: finding.Error,
		Reason: "a Workload at a priority its namespace may not use can evict what the policy protects (an experiment at the always-on models' priority evicts every training and batch job)"})
	RuleQueueNotAllowed = finding.Register(finding.Rule{ID: contract.RuleQueueNotAllowed, Verb: finding.Drift, Severity: finding.Error,
		Reason: "a Workload in a queue its namespace may not use takes quota the policy gives to other namespaces"})
)

// Bypass is one thing on the cluster that got around the policy.
type Bypass struct {
	// Rule is a contract.Rule* ID.
	Rule      string `json:"rule"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Message   string `json:"message"`
}

// Finding is the bypass as a finding of its rule.
func (b Bypass) Finding() finding.Finding {
	var r finding.Rule
	switch b.Rule {
	case contract.RuleGPUOutsideKueue:
		r = RuleGPUOutsideKueue
	case contract.RulePriorityNotAllowed:
		r = RulePriorityNotAllowed
	default:
		r = RuleQueueNotAllowed
	}
	f := r.New(b.Message)
	f.Object = drift.Ref(b.Kind, b.Namespace, b.Name)
	return f
}

// Bypasses lists, in every namespace where p's GPU workloads run, the pods
// that hold shares or declare GPU memory outside Kueue, and the Workloads
// at a priority or in a queue their namespace may not use
// (policy.Allowed), each with its consequence. Finished pods and Workloads
// hold nothing and are skipped. It only lists.
func Bypasses(ctx context.Context, client dynamic.Interface, p *policy.Policy) ([]Bypass, error) {
	var out []Bypass
	for _, ns := range p.GPUNamespaces() {
		r := p.Allowed(ns)
		pods, err := client.Resource(podsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing pods in %s: %w", ns, err)
		}
		for i := range pods.Items {
			if b, ok := podBypass(p, r, &pods.Items[i]); ok {
				out = append(out, b)
			}
		}
		wls, err := client.Resource(contract.GVRWorkload).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing Workloads in %s: %w", ns, err)
		}
		for i := range wls.Items {
			out = append(out, workloadBypasses(p, r, &wls.Items[i])...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Namespace+"/"+a.Kind+"/"+a.Name+"/"+a.Rule < b.Namespace+"/"+b.Kind+"/"+b.Name+"/"+b.Rule
	})
	return out, nil
}

// podBypass reports a running or pending pod that asks for shares or
// declares GPU memory without a LocalQueue.
func podBypass(p *policy.Policy, r policy.Rights, u *unstructured.Unstructured) (Bypass, bool) {
	var pod corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod); err != nil {
		return Bypass{}, false
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return Bypass{}, false
	}
	if pod.Labels[contract.LabelKueueQueue] != "" {
		return Bypass{}, false
	}
	shares := podAmount(&pod, p.SharesResource())
	decl := podAmount(&pod, p.DeclarationResource)
	if shares.Sign() <= 0 && decl.Sign() <= 0 {
		return Bypass{}, false
	}
	var holds []string
	var sharesN, declMiB int64
	if shares.Sign() > 0 {
		sharesN = shares.Value()
		holds = append(holds, policy.FormatAmount(policy.Shares, sharesN))
	}
	if decl.Sign() > 0 {
		declMiB, _ = policy.QuantityMiB(decl)
		holds = append(holds, "a declaration of "+policy.FormatAmount(policy.GPUMemory, declMiB))
	}
	believe := "every quota of the policy counts them as free"
	if len(r.Queues) > 0 {
		believe = fmt.Sprintf("ClusterQueue %s counts them as free and goes on admitting jobs as if the card had them", strings.Join(r.Queues, ", "))
	}
	msg := fmt.Sprintf("pod %s/%s holds %s outside Kueue (no %s label): %s; it came in before the admission policy %s%s, which now rejects it: delete it and resubmit it through a LocalQueue (%s)",
		pod.Namespace, pod.Name, strings.Join(holds, " and "), contract.LabelKueueQueue, believe,
		contract.AdmissionPolicyPrefix, pod.Namespace, strings.Join(r.LocalQueues, ", "))
	return Bypass{Rule: contract.RuleGPUOutsideKueue, Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, Message: msg}, true
}

// podAmount sums a resource over the pod's containers (requests, else
// limits), as the scheduler counts extended resources.
func podAmount(pod *corev1.Pod, name string) resource.Quantity {
	var sum resource.Quantity
	for _, c := range pod.Spec.Containers {
		q, ok := c.Resources.Requests[corev1.ResourceName(name)]
		if !ok {
			q, ok = c.Resources.Limits[corev1.ResourceName(name)]
		}
		if ok {
			sum.Add(q)
		}
	}
	return sum
}

// workloadBypasses reports an unfinished Workload whose queue or priority
// the namespace may not use.
func workloadBypasses(p *policy.Policy, r policy.Rights, wl *unstructured.Unstructured) []Bypass {
	if finished(wl) {
		return nil
	}
	var out []Bypass
	ns, name := wl.GetNamespace(), wl.GetName()
	who := "Workload " + ns + "/" + name
	if owners := wl.GetOwnerReferences(); len(owners) > 0 {
		who += " (" + owners[0].Kind + " " + owners[0].Name + ")"
	}
	if q, _, _ := unstructured.NestedString(wl.Object, "spec", "queueName"); q != "" && !r.MayUseLocalQueue(q) {
		out = append(out, Bypass{Rule: contract.RuleQueueNotAllowed, Kind: "Workload", Namespace: ns, Name: name,
			Message: fmt.Sprintf("%s is in LocalQueue %s, which namespace %s may not use (it may use %s): it takes quota the policy gives to other namespaces",
				who, q, ns, orNone(r.LocalQueues))})
	}
	kind, _, _ := unstructured.NestedString(wl.Object, "spec", "priorityClassRef", "kind")
	pr, _, _ := unstructured.NestedString(wl.Object, "spec", "priorityClassRef", "name")
	if kind == "WorkloadPriorityClass" && pr != "" && !r.MayUsePriority(pr) {
		out = append(out, Bypass{Rule: contract.RulePriorityNotAllowed, Kind: "Workload", Namespace: ns, Name: name,
			Message: fmt.Sprintf("%s runs at priority %s, which namespace %s may not use (it may use %s): %s",
				who, pr, ns, orNone(r.Priorities), evictable(p, pr))})
	}
	return out
}

// evictable says whom a workload at the priority outranks: what its queue
// may evict where it preempts lower priorities.
func evictable(p *policy.Policy, name string) string {
	top, ok := p.Priorities[name]
	if !ok {
		return "Kueue orders it by a priority the policy does not define"
	}
	var below []string
	for _, pr := range p.Ladder() {
		if pr.Value < top.Value {
			below = append(below, pr.Name)
		}
	}
	if len(below) == 0 {
		return fmt.Sprintf("at %d it is at the top of the ladder, and nothing evicts it", top.Value)
	}
	return fmt.Sprintf("at %d it outranks every %s workload: where its ClusterQueue preempts lower priorities it can evict them, and none of them can evict it",
		top.Value, strings.Join(below, ", "))
}

func finished(wl *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Finished" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func orNone(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	return strings.Join(vs, ", ")
}

// bypassText prints what got around the policy (text, or markdown).
func (r *Report) bypassText(w io.Writer, md bool) {
	bs := r.Live.Bypasses
	if md {
		fmt.Fprintf(w, "\n### Around the policy\n\n")
		if len(bs) == 0 {
			fmt.Fprintf(w, "Every GPU pod goes through Kueue, at a priority and in a queue its namespace may use.\n")
		}
		for _, b := range bs {
			fmt.Fprintf(w, "- **%s** `%s`: %s\n", b.Rule, drift.Ref(b.Kind, b.Namespace, b.Name), b.Message)
		}
		return
	}
	if len(bs) == 0 {
		fmt.Fprintf(w, "\naround the policy: nothing; every GPU pod goes through Kueue, at a priority and in a queue its namespace may use\n")
		return
	}
	fmt.Fprintf(w, "\naround the policy: %d\n", len(bs))
	for _, b := range bs {
		fmt.Fprintf(w, "  %s: %s\n", b.Rule, b.Message)
	}
}
