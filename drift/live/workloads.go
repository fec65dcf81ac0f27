package live

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

var (
	podsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	limitRangesGVR = schema.GroupVersionResource{Version: "v1", Resource: "limitranges"}
)

// limitRangerAnnotation is what the LimitRanger admission plugin writes on a
// pod whose requests or limits it defaulted ("LimitRanger plugin set: …").
const limitRangerAnnotation = "kubernetes.io/limit-ranger"

// WorkloadCount is what Kueue counted of one Workload's GPU-memory
// declaration against what its job declared.
type WorkloadCount struct {
	Namespace string `json:"namespace"`
	Workload  string `json:"workload"`
	// Owner is the object Kueue made the Workload for, e.g. Pod/eval-7x2.
	Owner string `json:"owner"`
	// Workflow is the Argo Workflow the pod belongs to, if any.
	Workflow string `json:"workflow,omitempty"`
	// AskedMiB is what the job asked for (the Workflow's gpu-memory
	// parameter), in MiB rounded down, -1 when unknown.
	AskedMiB int64 `json:"askedMiB"`
	// DeclaredByJob is false when the pod's declaration came from the
	// LimitRange default, not from the job.
	DeclaredByJob bool `json:"declaredByJob"`
	// CountedMiB is the declaration Kueue counts (admitted: status.admission;
	// pending: the pod set's requests), in MiB rounded down, -1 when none.
	// Quantities are read as Kubernetes reads them: a plain 1024 is 1,024
	// bytes (policy.QuantityMiB).
	CountedMiB int64 `json:"countedMiB"`
	Admitted   bool  `json:"admitted"`
	// AtDefault: Kueue counts the namespace's LimitRange default, not
	// what the job declares: it declared nothing of its own, or (LimitOnly)
	// it declared by limit alone.
	AtDefault bool `json:"atDefault"`
	// LimitOnly: a container of its pod sets states the declaration by a
	// limit and no request. Kueue v0.17 gives such a container the
	// LimitRange's defaultRequest before it looks at the limit
	// (admission.CountPodSets; kubernetes-sigs/kueue#15020).
	LimitOnly bool `json:"limitOnly"`
	// DeclaredMiB is what the pod sets' containers state themselves
	// (requests, and the limits of limit-only containers), in MiB rounded
	// down; -1 when none states it.
	DeclaredMiB int64  `json:"declaredMiB"`
	Message     string `json:"message"`

	// declared is what the containers state (DeclaredMiB as a quantity);
	// stated says it was read.
	declared resource.Quantity
	stated   bool
}

// Workloads checks every Workload in the cluster: the GPU-memory declaration
// (resource decl, in MiB) its pods carry against what Kueue counted, naming
// the jobs counted at the LimitRange default — the write-up's eval job that
// declared 12,452 MiB and was counted as 1,024, and a Job that declares by
// limit only, which Kueue v0.17 counts at the LimitRange's defaultRequest
// (admission.CountPodSets). defaultMiB is the policy's default, named when
// the cluster's LimitRange gives another. It only lists: the Workloads,
// then the pods, LimitRanges and Workflows of the namespaces that hold
// Workloads, each once, paginated — its requests grow with namespaces, not
// with Workloads.
func Workloads(ctx context.Context, client dynamic.Interface, decl string, defaultMiB int64) ([]WorkloadCount, error) {
	items, err := listAll(ctx, client.Resource(contract.GVRWorkload), metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Kueue Workloads: %w", err)
	}
	pods, workflows := map[string]*unstructured.Unstructured{}, map[string]*unstructured.Unstructured{}
	ranges := map[string]admission.LimitRangeDefaults{}
	listed := map[string]bool{}
	for _, wl := range items {
		ns := wl.GetNamespace()
		if listed[ns] {
			continue
		}
		listed[ns] = true
		ps, err := listAll(ctx, client.Resource(podsGVR).Namespace(ns), metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing pods in %s: %w", ns, err)
		}
		for i := range ps {
			pods[ns+"/"+ps[i].GetName()] = &ps[i]
		}
		// The LimitRanges Kueue applies to a pod set that has no
		// request (workload.AdjustResources).
		lrs, err := listAll(ctx, client.Resource(limitRangesGVR).Namespace(ns), metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing LimitRanges in %s: %w", ns, err)
		}
		typed := make([]corev1.LimitRange, len(lrs))
		for i := range lrs {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(lrs[i].Object, &typed[i]); err != nil {
				return nil, fmt.Errorf("LimitRange %s/%s: %w", ns, lrs[i].GetName(), err)
			}
		}
		ranges[ns] = admission.ContainerDefaults(typed)
		// Workflows are read where Argo serves them; without Argo no
		// Workload has a Workflow to ask (workflowAsk's unknown).
		if wfs, err := listAll(ctx, client.Resource(contract.GVRWorkflow).Namespace(ns), metav1.ListOptions{}); err == nil {
			for i := range wfs {
				workflows[ns+"/"+wfs[i].GetName()] = &wfs[i]
			}
		}
	}
	var out []WorkloadCount
	for _, wl := range items {
		wc := WorkloadCount{Namespace: wl.GetNamespace(), Workload: wl.GetName(), AskedMiB: -1, CountedMiB: -1, DeclaredMiB: -1, DeclaredByJob: true}
		var podName string
		for _, ref := range wl.GetOwnerReferences() {
			wc.Owner = ref.Kind + "/" + ref.Name
			if ref.Kind == "Pod" {
				podName = ref.Name
			}
		}
		counted := readDeclaration(&wl, decl, ranges[wl.GetNamespace()], &wc)
		var asked resource.Quantity
		hasAsked := false
		if pod := pods[wl.GetNamespace()+"/"+podName]; podName != "" && pod != nil {
			if strings.Contains(pod.GetAnnotations()[limitRangerAnnotation], decl) {
				wc.DeclaredByJob = false
			}
			if wf := pod.GetLabels()[contract.LabelArgoWorkflow]; wf != "" {
				wc.Workflow = wf
				asked, hasAsked = workflowAsk(workflows[wl.GetNamespace()+"/"+wf])
			}
		}
		if hasAsked {
			wc.AskedMiB, _ = policy.QuantityMiB(asked)
		}
		wc.AtDefault = atDefault(wc, counted)
		wc.Message = countMessage(wc, asked, hasAsked, counted, defaultMiB)
		out = append(out, wc)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Workload < out[j].Workload
	})
	return out, nil
}

// countMessage says what Kueue counted of a Workload's declaration against
// what its job asked, each quantity in the lab's words (policy.DescribeMemory,
// the same words drift uses for a manifest's quantities).
func countMessage(wc WorkloadCount, asked resource.Quantity, hasAsked bool, counted resource.Quantity, defaultMiB int64) string {
	who := wc.Owner
	if wc.Workflow != "" {
		who = "Workflow " + wc.Workflow
	}
	verb := "is counted"
	if wc.Admitted {
		verb = "was counted"
	}
	declared := counted
	if wc.stated {
		declared = wc.declared
	}
	switch {
	case wc.LimitOnly && wc.AtDefault:
		return fmt.Sprintf("%s declares %s by limit only: it %s as %s, the LimitRange default (Kueue v0.17 gives a container without a request "+
			"its namespace's LimitRange defaultRequest before it looks at the limit, kubernetes-sigs/kueue#15020), while its pod asks %s of the node",
			who, policy.DescribeMemory(declared), verb, policy.DescribeMemory(counted), policy.DescribeMemory(declared))
	case wc.LimitOnly:
		return fmt.Sprintf("%s declares %s by limit only and %s as %s: its namespace has no LimitRange default request for it, so Kueue takes the limit",
			who, policy.DescribeMemory(declared), verb, policy.DescribeMemory(counted))
	case wc.AtDefault && counted.IsZero():
		return fmt.Sprintf("%s declares no GPU memory and its namespace has no LimitRange default: Kueue counts none of it, as if it used no GPU memory", who)
	case wc.AtDefault && hasAsked && asked.Cmp(counted) != 0:
		return fmt.Sprintf("%s asked for %s of GPU memory, but its pod declares none: it %s as %s, the LimitRange default",
			who, policy.DescribeMemory(asked), verb, policy.DescribeMemory(counted))
	case wc.AtDefault:
		msg := fmt.Sprintf("%s declares no GPU memory: it %s at the %s LimitRange default", who, verb, policy.DescribeMemory(counted))
		if counted.Cmp(policy.MiBQuantity(defaultMiB)) != 0 {
			msg += fmt.Sprintf(" (the policy's default is %s: the namespace's LimitRange is not the render's)", policy.FormatAmount(policy.GPUMemory, defaultMiB))
		}
		return msg
	default:
		return fmt.Sprintf("%s declares %s and %s as %s", who, policy.DescribeMemory(declared), verb, policy.DescribeMemory(counted))
	}
}

// readDeclaration fills in what a Workload's pod sets state of the
// declaration (DeclaredByJob, DeclaredMiB, LimitOnly) and what Kueue counts
// of it (Admitted, CountedMiB): its admission's usage; pending, the
// requests it recorded when it last tried the Workload
// (status.resourceRequests, workload.PropagateResourceRequests), or what
// it will count (admission.CountPodSets).
func readDeclaration(wl *unstructured.Unstructured, decl string, lr admission.LimitRangeDefaults, wc *WorkloadCount) resource.Quantity {
	st := podSetCount(wl, decl, lr)
	if st.ByRequest+st.ByLimitOnly == 0 {
		wc.DeclaredByJob = false // the pod set carries none: Kueue applies the LimitRange
	} else {
		wc.DeclaredMiB, _ = policy.QuantityMiB(st.Stated)
		wc.declared, wc.stated = st.Stated, true
	}
	wc.LimitOnly = st.ByLimitOnly > 0
	counted := st.Counted
	if used, ok := admittedDeclaration(wl, decl); ok {
		wc.Admitted, counted = true, used
	} else if recorded, ok := recordedRequests(wl, decl); ok {
		counted = recorded
	}
	wc.CountedMiB, _ = policy.QuantityMiB(counted)
	return counted
}

// atDefault: Kueue counts the LimitRange default, not the job's own
// declaration — it declared none, or it declared by limit only and Kueue
// counted (or will count) other than it states: a limit-only container was
// given the namespace's defaultRequest.
func atDefault(wc WorkloadCount, counted resource.Quantity) bool {
	return !wc.DeclaredByJob || (wc.LimitOnly && counted.Cmp(wc.declared) != 0)
}

// podSetCount reads a Workload's pod sets as Kueue counts them
// (admission.CountPodSets) with its namespace's LimitRange defaults; a pod
// set that does not decode counts as stating nothing.
func podSetCount(wl *unstructured.Unstructured, decl string, lr admission.LimitRangeDefaults) admission.Stated {
	var typed kueue.Workload
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(wl.Object, &typed); err != nil {
		return admission.Stated{}
	}
	return admission.CountPodSets(typed.Spec.PodSets, corev1.ResourceName(decl), lr)
}

// recordedRequests sums status.resourceRequests[].resources[decl]: what
// Kueue counted of a pending Workload the last time it tried it
// (workload.PropagateResourceRequests); false when it recorded none.
func recordedRequests(wl *unstructured.Unstructured, decl string) (resource.Quantity, bool) {
	var total resource.Quantity
	rrs, ok, _ := unstructured.NestedSlice(wl.Object, "status", "resourceRequests")
	if !ok || len(rrs) == 0 {
		return total, false
	}
	for _, r := range rrs {
		rm, _ := r.(map[string]any)
		q, ok, _ := unstructured.NestedString(rm, "resources", decl)
		if !ok {
			continue
		}
		if v, err := resource.ParseQuantity(q); err == nil {
			total.Add(v)
		}
	}
	return total, true
}

// admittedDeclaration sums status.admission.podSetAssignments[].resourceUsage[decl].
func admittedDeclaration(wl *unstructured.Unstructured, decl string) (resource.Quantity, bool) {
	var total resource.Quantity
	psas, ok, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	if !ok {
		return total, false
	}
	for _, p := range psas {
		pm, _ := p.(map[string]any)
		q, ok, _ := unstructured.NestedString(pm, "resourceUsage", decl)
		if !ok {
			continue
		}
		if v, err := resource.ParseQuantity(q); err == nil {
			total.Add(v)
		}
	}
	return total, true
}

// workflowAsk reads the gpu-memory parameter of a Workflow (what the job
// asked to declare); false when it has none or wf is nil (not found).
func workflowAsk(wf *unstructured.Unstructured) (resource.Quantity, bool) {
	if wf == nil {
		return resource.Quantity{}, false
	}
	params, _, _ := unstructured.NestedSlice(wf.Object, "spec", "arguments", "parameters")
	for _, p := range params {
		pm, _ := p.(map[string]any)
		if pm["name"] == contract.ParamGPUMemory {
			if v, err := resource.ParseQuantity(fmt.Sprint(pm["value"])); err == nil {
				return v, true
			}
		}
	}
	return resource.Quantity{}, false
}
