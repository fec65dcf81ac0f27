package status

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/verify"
)

// Observed is what status reads from the cluster: the objects behind every
// verdict. Analyze needs nothing else, so tests build it by hand.
type Observed struct {
	// Now is when the objects were read.
	Now time.Time
	// Workflows are the Argo Workflows in the policy's job namespaces.
	Workflows []wfv1.Workflow
	// Workloads are the Kueue Workloads in the policy's namespaces.
	Workloads []kueue.Workload
	// Pods are the pods in the policy's namespaces, and every pod elsewhere
	// that asks for the card's shares (they take node room outside Kueue).
	Pods []corev1.Pod
	// Events are the scheduler's FailedScheduling events of those pods.
	Events []corev1.Event
	// LockSizes are the live semaphore sizes (lock → size) from the
	// policy's semaphore ConfigMap; a lock missing here has the policy's.
	LockSizes map[string]int64
	// State is which on-demand services are up (verify.ReadState's rule).
	State verify.State
	// ReplicaSets and Deployments are those in the namespaces of the
	// on-demand services whose last request the policy reads from the
	// Deployment that owns the service's pod (lastActivity.on
	// "deployment"); empty otherwise.
	ReplicaSets []appsv1.ReplicaSet
	Deployments []appsv1.Deployment
}

// Clients are the API clients status reads through (get and list only).
type Clients = verify.Clients

// Read reads the objects status analyzes. It only gets and lists.
func Read(ctx context.Context, c Clients, p *policy.Policy) (*Observed, error) {
	o := &Observed{Now: time.Now(), LockSizes: map[string]int64{}}
	st, err := verify.ReadState(ctx, c, p)
	if err != nil {
		return nil, err
	}
	o.State = st
	nss := sets.New(p.Namespaces()...)
	for _, ns := range sets.List(nss) {
		ws, err := verify.ListWorkloads(ctx, c, ns)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading Workloads in %s: %w", ns, err)
		}
		o.Workloads = append(o.Workloads, ws...)
		ev, err := kube.List[corev1.Event](ctx, c.Dynamic, kube.GVREvent, ns, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
		if err != nil {
			return nil, fmt.Errorf("reading events in %s: %w", ns, err)
		}
		o.Events = append(o.Events, ev...)
	}
	for _, ns := range p.JobNamespaces() {
		wfs, err := kube.List[wfv1.Workflow](ctx, c.Dynamic, contract.GVRWorkflow, ns, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading Workflows in %s: %w", ns, err)
		}
		o.Workflows = append(o.Workflows, wfs...)
		if p.SemaphoreConfigMap != "" {
			cm, err := kube.Get[corev1.ConfigMap](ctx, c.Dynamic, kube.GVRConfigMap, ns, p.SemaphoreConfigMap)
			if err == nil {
				for k, v := range cm.Data {
					if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
						o.LockSizes[k] = n
					}
				}
			} else if !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("reading the semaphore ConfigMap %s/%s: %w", ns, p.SemaphoreConfigMap, err)
			}
		}
	}
	for _, ns := range deploymentNamespaces(p) {
		rs, err := kube.List[appsv1.ReplicaSet](ctx, c.Dynamic, kube.GVRReplicaSet, ns, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading ReplicaSets in %s (the policy reads a service's last request from its Deployment): %w", ns, err)
		}
		o.ReplicaSets = append(o.ReplicaSets, rs...)
		ds, err := kube.List[appsv1.Deployment](ctx, c.Dynamic, kube.GVRDeployment, ns, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading Deployments in %s (the policy reads a service's last request from its Deployment): %w", ns, err)
		}
		o.Deployments = append(o.Deployments, ds...)
	}
	pods, err := kube.List[corev1.Pod](ctx, c.Dynamic, kube.GVRPod, "", metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading pods: %w", err)
	}
	shares := corev1.ResourceName(p.Resource(policy.Shares))
	for _, pod := range pods {
		q := podRequests(&pod)[shares]
		if nss.Has(pod.Namespace) || q.Sign() > 0 {
			o.Pods = append(o.Pods, pod)
		}
	}
	return o, nil
}

// deploymentNamespaces are the namespaces of the on-demand services whose
// last request is read from a Deployment, sorted.
func deploymentNamespaces(p *policy.Policy) []string {
	nss := sets.New[string]()
	for _, n := range p.ServiceNames() {
		s := p.Services[n]
		if s.Mode == policy.OnDemand && s.LastActivity.Known() && s.LastActivity.On == policy.LastActivityOnDeployment {
			nss.Insert(s.Namespace)
		}
	}
	return sets.List(nss)
}

// podRequests sums a pod's container requests.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		for n, q := range c.Resources.Requests {
			cur := out[n]
			cur.Add(q)
			out[n] = cur
		}
	}
	return out
}
