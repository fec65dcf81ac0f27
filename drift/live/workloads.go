package live

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

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
	// AtDefault: the job declared nothing of its own and is counted at the
	// namespace default.
	AtDefault bool   `json:"atDefault"`
	Message   string `json:"message"`
}

// Workloads checks every Workload in the cluster: the GPU-memory declaration
// (resource decl, in MiB) its pods carry against what Kueue counted, naming
// the jobs counted at the LimitRange default defaultMiB — the write-up's eval
// job that declared 12,452 MiB and was counted as 1,024. It only gets and
// lists.
func Workloads(ctx context.Context, client dynamic.Interface, decl string, defaultMiB int64) ([]WorkloadCount, error) {
	list, err := client.Resource(contract.GVRWorkload).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Kueue Workloads: %w", err)
	}
	var out []WorkloadCount
	for _, wl := range list.Items {
		wc := WorkloadCount{Namespace: wl.GetNamespace(), Workload: wl.GetName(), AskedMiB: -1, CountedMiB: -1, DeclaredByJob: true}
		var podName string
		for _, ref := range wl.GetOwnerReferences() {
			wc.Owner = ref.Kind + "/" + ref.Name
			if ref.Kind == "Pod" {
				podName = ref.Name
			}
		}
		declared, hasDeclared := podSetDeclaration(&wl, decl)
		if !hasDeclared {
			wc.DeclaredByJob = false // the pod set carries none: Kueue applies the LimitRange
		}
		var asked resource.Quantity
		hasAsked := false
		if podName != "" {
			pod, err := client.Resource(podsGVR).Namespace(wl.GetNamespace()).Get(ctx, podName, metav1.GetOptions{})
			if err == nil {
				if strings.Contains(pod.GetAnnotations()[limitRangerAnnotation], decl) {
					wc.DeclaredByJob = false
				}
				if wf := pod.GetLabels()[contract.LabelArgoWorkflow]; wf != "" {
					wc.Workflow = wf
					asked, hasAsked = workflowAsk(ctx, client, wl.GetNamespace(), wf)
				}
			} else if !apierrors.IsNotFound(err) {
				return nil, err
			}
		}
		counted := policy.MiBQuantity(defaultMiB) // what the LimitRange will give it
		if used, ok := admittedDeclaration(&wl, decl); ok {
			wc.Admitted, counted = true, used
		} else if hasDeclared {
			counted = declared
		}
		wc.CountedMiB, _ = policy.QuantityMiB(counted)
		if hasAsked {
			wc.AskedMiB, _ = policy.QuantityMiB(asked)
		}
		wc.AtDefault = !wc.DeclaredByJob
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
	switch {
	case wc.AtDefault && hasAsked && asked.Cmp(counted) != 0:
		return fmt.Sprintf("%s asked for %s of GPU memory, but its pod declares none: it %s as %s, the LimitRange default",
			who, policy.DescribeMemory(asked), verb, policy.DescribeMemory(counted))
	case wc.AtDefault:
		return fmt.Sprintf("%s declares no GPU memory: it %s at the %s LimitRange default", who, verb, policy.FormatAmount(policy.GPUMemory, defaultMiB))
	default:
		return fmt.Sprintf("%s declares %s and %s as %s", who, policy.DescribeMemory(counted), verb, policy.DescribeMemory(counted))
	}
}

// podSetDeclaration sums the declaration over the Workload's pod sets
// (requests × count); false when no container declares it.
func podSetDeclaration(wl *unstructured.Unstructured, decl string) (resource.Quantity, bool) {
	sets, _, _ := unstructured.NestedSlice(wl.Object, "spec", "podSets")
	var total resource.Quantity
	found := false
	for _, s := range sets {
		sm, _ := s.(map[string]any)
		count, ok, _ := unstructured.NestedInt64(sm, "count")
		if !ok {
			count = 1
		}
		containers, _, _ := unstructured.NestedSlice(sm, "template", "spec", "containers")
		for _, c := range containers {
			cm, _ := c.(map[string]any)
			q, ok, _ := unstructured.NestedString(cm, "resources", "requests", decl)
			if !ok {
				q, ok, _ = unstructured.NestedString(cm, "resources", "limits", decl)
			}
			if ok {
				if v, err := resource.ParseQuantity(q); err == nil {
					v.Mul(count)
					total.Add(v)
					found = true
				}
			}
		}
	}
	return total, found
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
// asked to declare); false when it has none.
func workflowAsk(ctx context.Context, client dynamic.Interface, ns, name string) (resource.Quantity, bool) {
	wf, err := client.Resource(contract.GVRWorkflow).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
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
