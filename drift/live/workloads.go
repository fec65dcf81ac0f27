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
)

var (
	workloadsGVR = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}
	podsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	workflowsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}
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
	// parameter), -1 when unknown.
	AskedMiB int64 `json:"askedMiB"`
	// DeclaredByJob is false when the pod's declaration came from the
	// LimitRange default, not from the job.
	DeclaredByJob bool `json:"declaredByJob"`
	// CountedMiB is the declaration Kueue counts (admitted: status.admission;
	// pending: the pod set's requests), -1 when none.
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
	list, err := client.Resource(workloadsGVR).List(ctx, metav1.ListOptions{})
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
		templateMiB := podSetDeclaration(&wl, decl)
		if templateMiB < 0 {
			wc.DeclaredByJob = false // the pod set carries none: Kueue applies the LimitRange
		}
		if podName != "" {
			pod, err := client.Resource(podsGVR).Namespace(wl.GetNamespace()).Get(ctx, podName, metav1.GetOptions{})
			if err == nil {
				if strings.Contains(pod.GetAnnotations()[limitRangerAnnotation], decl) {
					wc.DeclaredByJob = false
				}
				if wf := pod.GetLabels()["workflows.argoproj.io/workflow"]; wf != "" {
					wc.Workflow = wf
					wc.AskedMiB = workflowAsk(ctx, client, wl.GetNamespace(), wf)
				}
			} else if !apierrors.IsNotFound(err) {
				return nil, err
			}
		}
		if used, ok := admittedDeclaration(&wl, decl); ok {
			wc.Admitted, wc.CountedMiB = true, used
		} else if templateMiB >= 0 {
			wc.CountedMiB = templateMiB
		} else {
			wc.CountedMiB = defaultMiB // what the LimitRange will give it
		}
		wc.AtDefault = !wc.DeclaredByJob
		wc.Message = countMessage(wc, defaultMiB)
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

func countMessage(wc WorkloadCount, defaultMiB int64) string {
	who := wc.Owner
	if wc.Workflow != "" {
		who = "Workflow " + wc.Workflow
	}
	verb := "is counted"
	if wc.Admitted {
		verb = "was counted"
	}
	switch {
	case wc.AtDefault && wc.AskedMiB >= 0 && wc.AskedMiB != wc.CountedMiB:
		return fmt.Sprintf("%s asked for %s MiB of GPU memory, but its pod declares none: it %s as %s MiB, the LimitRange default",
			who, policy.Thousands(wc.AskedMiB), verb, policy.Thousands(wc.CountedMiB))
	case wc.AtDefault:
		return fmt.Sprintf("%s declares no GPU memory: it %s at the %s MiB LimitRange default", who, verb, policy.Thousands(defaultMiB))
	default:
		return fmt.Sprintf("%s declares %s MiB and %s as %s MiB", who, policy.Thousands(wc.CountedMiB), verb, policy.Thousands(wc.CountedMiB))
	}
}

// podSetDeclaration sums the declaration over the Workload's pod sets
// (requests × count), -1 when no container declares it.
func podSetDeclaration(wl *unstructured.Unstructured, decl string) int64 {
	sets, _, _ := unstructured.NestedSlice(wl.Object, "spec", "podSets")
	total, found := int64(0), false
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
					total += count * mib(v)
					found = true
				}
			}
		}
	}
	if !found {
		return -1
	}
	return total
}

// admittedDeclaration sums status.admission.podSetAssignments[].resourceUsage[decl].
func admittedDeclaration(wl *unstructured.Unstructured, decl string) (int64, bool) {
	psas, ok, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	if !ok {
		return 0, false
	}
	total := int64(0)
	for _, p := range psas {
		pm, _ := p.(map[string]any)
		q, ok, _ := unstructured.NestedString(pm, "resourceUsage", decl)
		if !ok {
			continue
		}
		if v, err := resource.ParseQuantity(q); err == nil {
			total += mib(v)
		}
	}
	return total, true
}

func workflowAsk(ctx context.Context, client dynamic.Interface, ns, name string) int64 {
	wf, err := client.Resource(workflowsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return -1
	}
	params, _, _ := unstructured.NestedSlice(wf.Object, "spec", "arguments", "parameters")
	for _, p := range params {
		pm, _ := p.(map[string]any)
		if pm["name"] == "gpu-memory" {
			if v, err := resource.ParseQuantity(fmt.Sprint(pm["value"])); err == nil {
				return mib(v)
			}
		}
	}
	return -1
}

// mib converts a declaration quantity to MiB: "1024Mi" is 1,024 MiB. A plain
// integer is taken as MiB as well, the policy's unit for GPU memory.
func mib(q resource.Quantity) int64 {
	if strings.HasSuffix(q.String(), "i") || q.Value() >= 1<<20 {
		return q.Value() >> 20
	}
	return q.Value()
}
