package verify

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// Labels and annotations verify puts on what it creates.
const (
	// LabelRun carries the run's id on every Workflow, pod and ConfigMap a
	// run creates; cleanup deletes by it.
	LabelRun = "gpupolicy.dev/verify-run"
	// LabelBatch names the batch ("l4b2", "cancel") a Workflow belongs to.
	LabelBatch = "gpupolicy.dev/verify-batch"
	// AnnotationRunSeconds tells a simulated (KWOK) node how long the pod
	// runs: the lab cluster's pods run for this annotation's seconds (see
	// cluster.AnnotationRunSeconds). A real kubelet ignores it.
	AnnotationRunSeconds = "gpupolicy.dev/run-seconds"
	// AnnotationExitCode tells a simulated node the exit code the pod's
	// main container ends with (cluster.AnnotationExitCode): a fault
	// batch's crashing job carries the code the test job's own crash gives
	// (testjob.CrashExitCode). A real kubelet ignores it.
	AnnotationExitCode = "gpupolicy.dev/exit-code"
	// FieldManager is verify's field manager.
	FieldManager = "gpupolicy-verify"
)

// Clients are the API clients verify uses (kube.Clients' Dynamic and
// REST): every object through the dynamic client, typed where verify
// reads it with kube.List and kube.Get; REST only for a pod's log.
type Clients struct {
	Dynamic dynamic.Interface
	REST    rest.Interface
}

func toTyped(u *unstructured.Unstructured, out any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// ListWorkloads reads the Kueue Workloads of a namespace, typed.
func ListWorkloads(ctx context.Context, c Clients, ns string) ([]kueue.Workload, error) {
	return kube.List[kueue.Workload](ctx, c.Dynamic, contract.GVRWorkload, ns, metav1.ListOptions{})
}

// holdsQuota reports whether a Workload holds quota (QuotaReserved true,
// not Finished) and in which ClusterQueue.
func holdsQuota(w *kueue.Workload) (string, time.Time, bool) {
	if meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished) {
		return "", time.Time{}, false
	}
	c := meta.FindStatusCondition(w.Status.Conditions, kueue.WorkloadQuotaReserved)
	if c == nil || c.Status != metav1.ConditionTrue {
		return "", time.Time{}, false
	}
	cq := ""
	if w.Status.Admission != nil {
		cq = string(w.Status.Admission.ClusterQueue)
	}
	return cq, c.LastTransitionTime.Time, true
}

// ownerName is the name of the Workload's first owner (its pod, job or
// deployment's pod).
func ownerName(w *kueue.Workload) string {
	for _, o := range w.OwnerReferences {
		return o.Name
	}
	return ""
}

// NamesService reports whether an object name belongs to a service: it
// equals the service's name, starts with "NAME-", or contains "-NAME-"
// (Kueue names a pod's Workload "pod-NAME-…").
func NamesService(obj, svc string) bool {
	return obj == svc || strings.HasPrefix(obj, svc+"-") || strings.Contains(obj, "-"+svc+"-")
}

// ReadState reads which on-demand services are up from the cluster.
//
// The rule: an on-demand service is up when a Kueue Workload in the
// service's namespace holds quota (QuotaReserved true and not Finished) in
// the service's ClusterQueue and names the service (the Workload's or its
// owner pod's name is the service's name, starts with "NAME-" or contains
// "-NAME-"); when the service is the only on-demand service using that
// namespace and ClusterQueue, any such Workload counts. A service whose
// Deployment is scaled to zero has no pod, hence no Workload, and is down;
// a pod the queue has not admitted yet (a 7B that is waking) holds no
// quota, is down, and is noted. Always-on services are checked the same way
// and a note says when fewer hold quota than the policy declares, since
// the prediction assumes they all do.
func ReadState(ctx context.Context, c Clients, p *policy.Policy) (State, error) {
	st := State{Services: map[string]string{}, Evidence: map[string]string{}}
	byNS := map[string][]kueue.Workload{}
	load := func(ns string) ([]kueue.Workload, error) {
		if ws, ok := byNS[ns]; ok {
			return ws, nil
		}
		ws, err := ListWorkloads(ctx, c, ns)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading Workloads in %s: %w", ns, err)
		}
		byNS[ns] = ws
		return ws, nil
	}
	// sharing counts the services of one mode per namespace/queue.
	sharing := map[string]int{}
	for _, n := range p.ServiceNames() {
		s := p.Services[n]
		sharing[string(s.Mode)+"/"+s.Namespace+"/"+s.Queue]++
	}
	for _, n := range p.ServiceNames() {
		s := p.Services[n]
		ws, err := load(s.Namespace)
		if err != nil {
			return st, err
		}
		alone := sharing[string(s.Mode)+"/"+s.Namespace+"/"+s.Queue] == 1
		var holding, pending []string
		var since time.Time
		for i := range ws {
			w := &ws[i]
			named := NamesService(w.Name, n) || NamesService(ownerName(w), n)
			if !named && !alone {
				continue
			}
			if cq, t, ok := holdsQuota(w); ok {
				if cq != s.Queue {
					continue
				}
				holding = append(holding, w.Name)
				if since.IsZero() || t.Before(since) {
					since = t
				}
			} else if !meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished) && named {
				pending = append(pending, w.Name)
			}
		}
		switch s.Mode {
		case policy.OnDemand:
			if len(holding) > 0 {
				st.Services[n] = policy.ServiceUp
				st.Evidence[n] = fmt.Sprintf("Workload %s/%s holds quota in %s since %s", s.Namespace, holding[0], s.Queue, since.UTC().Format("15:04:05"))
			} else {
				st.Services[n] = policy.ServiceDown
				st.Evidence[n] = fmt.Sprintf("no Workload in %s holds quota in %s for it", s.Namespace, s.Queue)
				if len(pending) > 0 {
					st.Notes = append(st.Notes, fmt.Sprintf("%s: Workload %s/%s is waiting for quota (waking?); counted as down", n, s.Namespace, pending[0]))
				}
			}
		default:
			if len(holding) == 0 {
				st.AlwaysOnAbsent = append(st.AlwaysOnAbsent, n)
				st.Notes = append(st.Notes, fmt.Sprintf("always-on service %s holds no quota in %s (no Workload in %s): the prediction is made without it, for the state observed", n, s.Queue, s.Namespace))
			}
		}
	}
	return st, nil
}

// liveLockSize reads a lock's size from the semaphore ConfigMap in ns
// (the key is the lock's name).
func liveLockSize(ctx context.Context, c Clients, ns, configMap, lock string) *int {
	if configMap == "" {
		return nil
	}
	cm, err := kube.Get[corev1.ConfigMap](ctx, c.Dynamic, kube.GVRConfigMap, ns, configMap)
	if err != nil {
		return nil
	}
	v, ok := cm.Data[lock]
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return nil
	}
	return &n
}

// containerStatus returns the main container's status (the first
// container's when none is called main).
func containerStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == contract.MainContainer {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// holdsLock reports whether Argo has given the Workflow its lock: a
// semaphore or mutex it holds in status.synchronization.
func holdsLock(wf *wfv1.Workflow) bool {
	sy := wf.Status.Synchronization
	if sy == nil {
		return false
	}
	if sy.Semaphore != nil {
		for _, h := range sy.Semaphore.Holding {
			if len(h.Holders) > 0 {
				return true
			}
		}
	}
	if sy.Mutex != nil {
		for _, h := range sy.Mutex.Holding {
			if h.Holder != "" {
				return true
			}
		}
	}
	return false
}

// workflowPhase is a Workflow's phase and message.
func workflowPhase(wf *wfv1.Workflow) (wfv1.WorkflowPhase, string) {
	msg := wf.Status.Message
	for _, n := range wf.Status.Nodes {
		if n.Type == wfv1.NodeTypePod && n.Message != "" {
			msg = n.Message
		}
	}
	return wf.Status.Phase, msg
}

func earliest(cur, t time.Time) time.Time {
	if t.IsZero() {
		return cur
	}
	if cur.IsZero() || t.Before(cur) {
		return t
	}
	return cur
}
