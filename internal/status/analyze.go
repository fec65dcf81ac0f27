package status

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/verify"
)

// kueueGate is the scheduling gate Kueue puts on a pod until it admits it.
const kueueGate = "kueue.x-k8s.io/admission"

type analyzer struct {
	in   Input
	p    *policy.Policy
	o    *Observed
	now  time.Time
	snap *admission.Snapshot
	// holders by Workload namespace/name
	holders  []*holder
	jobs     []*job
	podByKey map[string]*corev1.Pod
	wlByPod  map[string]*kueue.Workload
	rep      *Report
}

func key(ns, name string) string { return ns + "/" + name }

// Analyze builds the report from the observed objects. It is pure: the
// same objects give the same report.
func Analyze(in Input, o *Observed) *Report {
	a := &analyzer{in: in, p: in.Policy, o: o, now: o.Now, podByKey: map[string]*corev1.Pod{}, wlByPod: map[string]*kueue.Workload{}}
	a.rep = &Report{
		Environment: in.Environment, Policy: a.p.Name, Pin: in.Pin, Now: o.Now.UTC(),
		State:    o.State.Label(),
		Services: []ServiceStatus{}, Queues: []QueueUsage{}, Cards: []CardUsage{}, Locks: []LockUsage{},
		Running: []RunningJob{}, Waiting: []Verdict{}, Predictions: []Comparison{}, Notes: append([]string{}, o.State.Notes...),
	}
	for i := range o.Pods {
		a.podByKey[key(o.Pods[i].Namespace, o.Pods[i].Name)] = &o.Pods[i]
	}
	for i := range o.Workloads {
		w := &o.Workloads[i]
		for _, ref := range w.OwnerReferences {
			if ref.Kind == "Pod" {
				a.wlByPod[key(w.Namespace, ref.Name)] = w
			}
		}
	}
	a.readJobs()
	a.buildSnapshot()
	a.services()
	a.usage()
	for _, j := range a.jobs {
		if j.state == "kueue" {
			a.kueueVerdict(j)
		}
	}
	for _, j := range a.jobs {
		switch j.state {
		case "node":
			a.nodeVerdict(j)
		case "lock":
			a.lockVerdict(j)
		}
	}
	a.locks()
	for _, j := range a.jobs {
		if j.verdict != nil {
			j.verdict.WaitingSeconds = int64(a.now.Sub(j.wf.CreationTimestamp.Time).Seconds())
			a.rep.Waiting = append(a.rep.Waiting, *j.verdict)
		}
		if j.state == "running" {
			a.rep.Running = append(a.rep.Running, RunningJob{Workflow: j.wf.Name, Template: j.variant.Name, Priority: j.priority,
				Started: utc(j.started), Deadline: utc(j.deadline), Phase: string(j.pod.Status.Phase)})
		}
	}
	a.compare()
	sort.SliceStable(a.rep.Waiting, func(i, j int) bool {
		return a.rep.Waiting[i].Stuck && !a.rep.Waiting[j].Stuck
	})
	for _, v := range a.rep.Waiting {
		if v.Stuck {
			a.rep.Stuck++
		}
	}
	return a.rep
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// clock prints a time as the lab reads it: "15:04:05 UTC" (with the date
// when it is not today's).
func (a *analyzer) clock(t time.Time) string {
	t = t.UTC()
	if t.Format("2006-01-02") != a.now.UTC().Format("2006-01-02") {
		return t.Format("2006-01-02 15:04:05 UTC")
	}
	return t.Format("15:04:05 UTC")
}

func (a *analyzer) in_(d time.Time) string {
	dur := d.Sub(a.now).Round(time.Second)
	if dur <= 0 {
		return "now"
	}
	return "in " + dur.String()
}

// readJobs finds the GPU step Workflows and where each is.
func (a *analyzer) readJobs() {
	for i := range a.o.Workflows {
		wf := &a.o.Workflows[i]
		name := ""
		if wf.Spec.WorkflowTemplateRef != nil {
			name = wf.Spec.WorkflowTemplateRef.Name
		}
		v, ok := a.p.Variant(name)
		if !ok {
			continue
		}
		j := &job{wf: wf, variant: v, priority: v.Template.Priority}
		for _, par := range wf.Spec.Arguments.Parameters {
			if par.Name == contract.ParamPriority && par.Value != nil && par.Value.String() != "" {
				j.priority = par.Value.String()
			}
		}
		if wf.Status.Phase.Completed() {
			continue
		}
		for _, pod := range a.o.Pods {
			if pod.Namespace == wf.Namespace && pod.Labels[contract.LabelArgoWorkflow] == wf.Name && pod.DeletionTimestamp == nil {
				if pod.Status.Phase == corev1.PodPending || pod.Status.Phase == corev1.PodRunning {
					j.pod = a.podByKey[key(pod.Namespace, pod.Name)]
				}
			}
		}
		if s := wf.Status.Synchronization; s != nil && s.Semaphore != nil {
			for _, h := range s.Semaphore.Holding {
				if len(h.Holders) > 0 {
					j.holds = append(j.holds, lockOf(h.Semaphore))
				}
			}
			if j.pod == nil {
				for _, w := range s.Semaphore.Waiting {
					if l := lockOf(w.Semaphore); !slices.Contains(j.holds, l) {
						j.waitLock = l
					}
				}
			}
		}
		if j.pod == nil && j.waitLock == "" {
			for _, n := range wf.Status.Nodes {
				if l, ok := waitingFor(n.Message); ok {
					j.waitLock = l
				}
			}
		}
		switch {
		case j.pod != nil:
			j.wl = a.wlByPod[key(j.pod.Namespace, j.pod.Name)]
			reserved := j.wl != nil && holdsQuota(j.wl)
			switch {
			case !reserved && (j.wl != nil || gated(j.pod)):
				j.state = "kueue"
			case unschedulable(j.pod) != "":
				j.state = "node"
			case j.pod.Status.Phase == corev1.PodRunning || reserved:
				j.state = "running"
			default:
				j.state = "starting"
			}
			j.started, j.deadline = a.timeLimit(j)
		case j.waitLock != "":
			j.state = "lock"
		default:
			j.state = "starting"
		}
		a.jobs = append(a.jobs, j)
	}
	sort.SliceStable(a.jobs, func(x, y int) bool {
		return a.jobs[x].wf.CreationTimestamp.Before(&a.jobs[y].wf.CreationTimestamp)
	})
}

// lockOf is the lock (the semaphore ConfigMap's key) of an Argo semaphore
// name, "NAMESPACE/ConfigMap/NAME/KEY".
func lockOf(sem string) string {
	if i := strings.LastIndex(sem, "/"); i >= 0 {
		return sem[i+1:]
	}
	return sem
}

// waitingFor reads Argo's node message "Waiting for NS/ConfigMap/CM/KEY
// lock. Lock status: 0/4".
func waitingFor(msg string) (string, bool) {
	rest, ok := strings.CutPrefix(msg, "Waiting for ")
	if !ok {
		return "", false
	}
	sem, _, ok := strings.Cut(rest, " lock")
	if !ok {
		return "", false
	}
	return lockOf(sem), true
}

func holdsQuota(w *kueue.Workload) bool {
	return meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadQuotaReserved) &&
		!meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished)
}

func gated(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == kueueGate {
			return true
		}
	}
	return false
}

// unschedulable is the scheduler's message on a pod it cannot place.
func unschedulable(pod *corev1.Pod) string {
	if pod.Status.Phase != corev1.PodPending || pod.Spec.NodeName != "" {
		return ""
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			if c.Message == "" {
				return "unschedulable"
			}
			return c.Message
		}
	}
	return ""
}

// timeLimit is when a job's pod started and when its time limit
// (activeDeadlineSeconds, counted from the pod's start) ends.
func (a *analyzer) timeLimit(j *job) (*time.Time, *time.Time) {
	pod := j.pod
	var start time.Time
	if pod.Status.StartTime != nil {
		start = pod.Status.StartTime.Time
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == contract.MainContainer && cs.State.Running != nil {
			start = cs.State.Running.StartedAt.Time
		}
	}
	if start.IsZero() || pod.Status.Phase != corev1.PodRunning {
		return nil, nil
	}
	limit := j.variant.Template.TimeLimitSeconds
	if pod.Spec.ActiveDeadlineSeconds != nil {
		limit = *pod.Spec.ActiveDeadlineSeconds
	}
	if limit <= 0 {
		return &start, nil
	}
	end := start.Add(time.Duration(limit) * time.Second)
	return &start, &end
}

// serviceOf names the policy's service an admitted Workload belongs to.
func (a *analyzer) serviceOf(w *kueue.Workload, cq string) string {
	owner := ""
	for _, ref := range w.OwnerReferences {
		owner = ref.Name
	}
	var cands []string
	for _, n := range a.p.ServiceNames() {
		s := a.p.Services[n]
		if s.Namespace == w.Namespace && s.Queue == cq {
			cands = append(cands, n)
		}
	}
	for _, n := range cands {
		if owner != "" && verify.NamesService(owner, n) || verify.NamesService(w.Name, n) {
			return n
		}
	}
	if len(cands) == 1 {
		return cands[0]
	}
	return ""
}

// request reads a Workload's request per kind as Kueue counts it: its
// admitted usage; pending, the requests Kueue recorded when it last tried
// it (status.resourceRequests, workload.PropagateResourceRequests), or,
// before its first try, its pod sets as Kueue will count them
// (admission.CountPodSets: a container without a request gets the job
// namespace's LimitRange default request, as render writes it, before its
// limit).
func (a *analyzer) request(w *kueue.Workload) (policy.Request, string) {
	sum := corev1.ResourceList{}
	card := ""
	add := func(rl corev1.ResourceList, n int64) {
		for r, q := range rl {
			q = q.DeepCopy()
			if n > 1 {
				q.Mul(n)
			}
			cur := sum[r]
			cur.Add(q)
			sum[r] = cur
		}
	}
	if w.Status.Admission != nil && holdsQuota(w) {
		for _, psa := range w.Status.Admission.PodSetAssignments {
			add(psa.ResourceUsage, 1)
			for _, f := range psa.Flavors {
				card = string(f)
			}
		}
	} else if len(w.Status.ResourceRequests) > 0 {
		for _, rr := range w.Status.ResourceRequests {
			add(rr.Resources, 1)
		}
	} else {
		lr := a.limitRange(w.Namespace)
		for _, k := range policy.Kinds {
			res := corev1.ResourceName(a.p.Resource(k))
			if st := admission.CountPodSets(w.Spec.PodSets, res, lr); !st.Counted.IsZero() {
				add(corev1.ResourceList{res: st.Counted}, 1)
			}
		}
	}
	return a.toRequest(sum), card
}

// limitRange is the container defaults of the LimitRange render writes in
// a job namespace: the policy's default declaration, as default and as
// default request; none elsewhere.
func (a *analyzer) limitRange(ns string) admission.LimitRangeDefaults {
	if !slices.Contains(a.p.JobNamespaces(), ns) {
		return admission.LimitRangeDefaults{}
	}
	def := corev1.ResourceList{corev1.ResourceName(a.p.DeclarationResource): policy.MiBQuantity(a.p.DefaultGPUMemoryMiB)}
	return admission.LimitRangeDefaults{Default: def, DefaultRequest: def}
}

func (a *analyzer) toRequest(rl corev1.ResourceList) policy.Request {
	get := func(k policy.Kind) int64 {
		q, ok := rl[corev1.ResourceName(a.p.Resource(k))]
		if !ok {
			return 0
		}
		if k == policy.Shares {
			return q.Value()
		}
		mib, whole := policy.QuantityMiB(q)
		if !whole {
			mib++ // Kueue counts the bytes; a part of a MiB still takes room
		}
		return mib
	}
	return policy.Request{Shares: get(policy.Shares), HostMemoryMiB: get(policy.HostMemory), GPUMemoryMiB: get(policy.GPUMemory)}
}

// queueOf maps a Workload's LocalQueue to the policy's ClusterQueue.
func (a *analyzer) queueOf(w *kueue.Workload) string {
	if w.Status.Admission != nil && w.Status.Admission.ClusterQueue != "" {
		return string(w.Status.Admission.ClusterQueue)
	}
	for _, n := range a.p.QueueNames() {
		q := a.p.Queues[n]
		if q.LocalQueue == string(w.Spec.QueueName) && slices.Contains(q.Namespaces, w.Namespace) {
			return n
		}
	}
	return ""
}

func (a *analyzer) priorityOf(w *kueue.Workload) (string, int32) {
	name := ""
	if w.Spec.PriorityClassRef != nil {
		name = w.Spec.PriorityClassRef.Name
	}
	var v int32
	if w.Spec.Priority != nil {
		v = *w.Spec.Priority
	} else if pr, ok := a.p.Priorities[name]; ok {
		v = pr.Value
	}
	return name, v
}

func (a *analyzer) cardOf(queue string) string {
	if q, ok := a.p.Queues[queue]; ok {
		if names := q.FlavorNames(); len(names) > 0 {
			return names[0]
		}
	}
	return ""
}

// buildSnapshot puts every admitted Workload into the admission model, in
// the order Kueue reserved their quota.
func (a *analyzer) buildSnapshot() {
	a.snap = admission.NewSnapshot(a.p)
	jobByWL := map[string]*job{}
	for _, j := range a.jobs {
		if j.wl != nil {
			jobByWL[key(j.wl.Namespace, j.wl.Name)] = j
		}
	}
	var adm []*kueue.Workload
	for i := range a.o.Workloads {
		if holdsQuota(&a.o.Workloads[i]) {
			adm = append(adm, &a.o.Workloads[i])
		}
	}
	reservedAt := func(w *kueue.Workload) time.Time {
		if c := meta.FindStatusCondition(w.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
			return c.LastTransitionTime.Time
		}
		return w.CreationTimestamp.Time
	}
	sort.SliceStable(adm, func(i, j int) bool { return reservedAt(adm[i]).Before(reservedAt(adm[j])) })
	for _, w := range adm {
		cq := a.queueOf(w)
		if _, ok := a.p.Queues[cq]; !ok {
			a.rep.Notes = append(a.rep.Notes, fmt.Sprintf("Workload %s/%s holds quota in ClusterQueue %s, which the policy does not define: left out of the quota arithmetic", w.Namespace, w.Name, cq))
			continue
		}
		req, card := a.request(w)
		if card == "" {
			card = a.cardOf(cq)
		}
		prio, val := a.priorityOf(w)
		h := &holder{wl: w, job: jobByWL[key(w.Namespace, w.Name)]}
		name := "Workload " + w.Namespace + "/" + w.Name
		if h.job != nil {
			name = "Workflow " + h.job.wf.Name
			if h.job.deadline != nil {
				h.end, h.endKind, h.endBy = h.job.deadline, UntilTimeLimit, name
				h.endWhat = fmt.Sprintf("Workflow %s reaches its %s time limit", h.job.wf.Name, seconds(h.job.deadline.Sub(*h.job.started)))
			}
		} else if s := a.serviceOf(w, cq); s != "" {
			h.service, name = s, s
		}
		h.w = a.snap.NewWorkload(admission.Workload{Name: name, Service: h.service, Queue: cq, Card: card, Priority: prio, Value: val, Request: req})
		a.snap.Add(h.w)
		a.holders = append(a.holders, h)
	}
}

func seconds(d time.Duration) string {
	return policy.Thousands(int64(d.Round(time.Second).Seconds())) + " s"
}

// services fills the services' states and the on-demand services' scale-down
// times into their holders.
func (a *analyzer) services() {
	for _, n := range a.p.ServiceNames() {
		s := a.p.Services[n]
		ss := ServiceStatus{Name: n, Mode: string(s.Mode), Evidence: a.o.State.Evidence[n]}
		var hs []*holder
		for _, h := range a.holders {
			if h.service == n {
				hs = append(hs, h)
			}
		}
		ss.Up = len(hs) > 0
		if s.Mode == policy.OnDemand {
			ss.Up = a.o.State.Services[n] == policy.ServiceUp
		}
		for _, h := range hs {
			if c := meta.FindStatusCondition(h.wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
				t := c.LastTransitionTime.Time.UTC()
				if ss.Since == nil || t.Before(*ss.Since) {
					ss.Since = &t
				}
			}
		}
		unknown := ""
		if s.Mode == policy.OnDemand {
			ss.LastRequest, ss.LastRequestFrom, unknown = a.lastRequest(n, s.LastActivity, hs)
		}
		if s.Mode == policy.OnDemand && ss.Up && s.IdleScaleDownSeconds > 0 {
			idle := time.Duration(s.IdleScaleDownSeconds) * time.Second
			var at time.Time
			var what string
			switch {
			case ss.LastRequest != nil:
				at = ss.LastRequest.Add(idle)
				if at.Before(a.now) {
					what = fmt.Sprintf("%s was due to scale to zero at %s, %s after its last request (%s), and is still up: its idle scaler is late", n, a.clock(at), seconds(idle), a.clock(*ss.LastRequest))
				} else {
					what = fmt.Sprintf("%s scales to zero at %s, %s after its last request (%s), unless another request comes", n, a.clock(at), seconds(idle), a.clock(*ss.LastRequest))
				}
			case ss.Since != nil:
				at = ss.Since.Add(idle)
				if at.Before(a.now) {
					at = a.now
					what = fmt.Sprintf("%s scales to zero %s after its last request; up since %s, %s: at the earliest now (%s)", n, seconds(idle), a.clock(*ss.Since), unknown, a.clock(a.now))
				} else {
					what = fmt.Sprintf("%s scales to zero %s after its last request: up since %s, so at %s at the earliest (%s)", n, seconds(idle), a.clock(*ss.Since), a.clock(at), unknown)
				}
			}
			if what != "" {
				ss.ScaleDownAt = &at
				for _, h := range hs {
					h.end, h.endKind, h.endWhat, h.endBy = &at, UntilScaleDown, what, n
				}
			}
		}
		a.rep.Services = append(a.rep.Services, ss)
	}
}

// lastActivityUnknown is what status says of an on-demand service whose
// last request the policy does not say where to read (no lastActivity).
const lastActivityUnknown = "last activity unknown: the policy does not say where to read it"

// lastRequest reads an on-demand service's last request exactly where the
// policy's lastActivity says: the annotation or label on each of the
// service's pods (the owners of the Workloads that hold its quota) or on the
// Deployment that owns the pod (pod → ReplicaSet → Deployment, by owner
// references). It returns the latest time read, where it was read from
// ("annotation K (RFC 3339) on pod llm/qwen2-5-7b"), and, when none was
// read, why ("last activity unknown: ...", twice: where and why are one).
// A value that does not parse is a note, not a time.
func (a *analyzer) lastRequest(svc string, la policy.LastActivity, hs []*holder) (*time.Time, string, string) {
	if !la.Known() {
		return nil, lastActivityUnknown, lastActivityUnknown
	}
	var last *time.Time
	var from string
	var looked []string
	for _, h := range hs {
		for _, ref := range h.wl.OwnerReferences {
			pod := a.podByKey[key(h.wl.Namespace, ref.Name)]
			if ref.Kind != "Pod" || pod == nil {
				continue
			}
			objKind, ns, name := "pod", pod.Namespace, pod.Name
			annotations, labels := pod.Annotations, pod.Labels
			if la.On == policy.LastActivityOnDeployment {
				d := a.deploymentOf(pod)
				if d == nil {
					looked = append(looked, fmt.Sprintf("pod %s/%s has no owning Deployment", pod.Namespace, pod.Name))
					continue
				}
				objKind, ns, name = "Deployment", d.Namespace, d.Name
				annotations, labels = d.Annotations, d.Labels
			}
			where := fmt.Sprintf("%s %s/%s", objKind, ns, name)
			v, ok := la.Read(annotations, labels)
			if !ok {
				looked = append(looked, "no "+la.Field()+" on "+where)
				continue
			}
			t, err := la.Parse(v)
			if err != nil {
				a.rep.Notes = append(a.rep.Notes, fmt.Sprintf("service %s: %s on %s: %v", svc, la.Field(), where, err))
				looked = append(looked, where+": unreadable")
				continue
			}
			if last == nil || t.After(*last) {
				last, from = &t, la.Field()+" on "+where
			}
		}
	}
	if last != nil {
		return last, from, ""
	}
	why := "last activity unknown: no pod of it holds quota to read " + la.Describe() + " from"
	if len(looked) > 0 {
		why = "last activity unknown: " + strings.Join(slices.Compact(looked), "; ")
	}
	return nil, why, why
}

// deploymentOf is the Deployment that owns a pod through its ReplicaSet
// (the ReplicaSet and Deployment controllers' controller owner
// references), or nil.
func (a *analyzer) deploymentOf(pod *corev1.Pod) *appsv1.Deployment {
	rsRef := metav1.GetControllerOf(pod)
	if rsRef == nil || rsRef.Kind != "ReplicaSet" {
		return nil
	}
	for i := range a.o.ReplicaSets {
		rs := &a.o.ReplicaSets[i]
		if rs.Namespace != pod.Namespace || rs.Name != rsRef.Name {
			continue
		}
		dRef := metav1.GetControllerOf(rs)
		if dRef == nil || dRef.Kind != "Deployment" {
			return nil
		}
		for j := range a.o.Deployments {
			if d := &a.o.Deployments[j]; d.Namespace == rs.Namespace && d.Name == dRef.Name {
				return d
			}
		}
	}
	return nil
}

// usage fills the queues' and cards' usage against quota.
func (a *analyzer) usage() {
	cardUsed := map[admission.FlavorResource]int64{}
	pending := map[string]int{}
	for i := range a.o.Workloads {
		w := &a.o.Workloads[i]
		if !holdsQuota(w) && !meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished) {
			pending[a.queueOf(w)]++
		}
	}
	for _, qn := range a.p.QueueNames() {
		q := a.p.Queues[qn]
		admitted := 0
		for _, h := range a.holders {
			if h.w.Queue == qn {
				admitted++
			}
		}
		for _, card := range q.FlavorNames() {
			qu := QueueUsage{Queue: qn, Card: card, Cohort: q.Cohort, Amounts: []Amount{}, Admitted: admitted, Pending: pending[qn]}
			for _, k := range policy.Kinds {
				fr := admission.FlavorResource{Card: card, Kind: k}
				used := a.snap.Usage(qn, fr)
				cardUsed[fr] += used
				qu.Amounts = append(qu.Amounts, Amount{Resource: a.p.Resource(k), Used: k.QuantityString(used),
					Quota: k.QuantityString(a.snap.Nominal(qn, fr)), Available: k.QuantityString(a.snap.Available(qn, fr))})
			}
			a.rep.Queues = append(a.rep.Queues, qu)
		}
	}
	for _, cn := range a.p.CardNames() {
		c := a.p.Cards[cn]
		cu := CardUsage{Card: cn, Amounts: []Amount{
			{Resource: a.p.Resource(policy.Shares), Used: policy.Shares.QuantityString(cardUsed[admission.FlavorResource{Card: cn, Kind: policy.Shares}]), Quota: policy.Shares.QuantityString(c.Shares)},
			{Resource: a.p.Resource(policy.GPUMemory), Used: policy.GPUMemory.QuantityString(cardUsed[admission.FlavorResource{Card: cn, Kind: policy.GPUMemory}]), Quota: policy.GPUMemory.QuantityString(c.MemoryMiB)},
		}}
		a.rep.Cards = append(a.rep.Cards, cu)
	}
}

// kueueVerdict: Kueue holds the job's pod.
func (a *analyzer) kueueVerdict(j *job) {
	v := a.newVerdict(j, InKueue)
	qw := &QuotaWait{Binding: []string{}, Request: map[string]string{}, Available: map[string]string{}, Holders: []QuotaHolder{}}
	v.Quota = qw
	j.verdict = v
	var w *admission.Workload
	var aheadWLs []*kueue.Workload
	if j.wl != nil {
		qw.Queue = a.queueOf(j.wl)
		req, _ := a.request(j.wl)
		prio, val := a.priorityOf(j.wl)
		if prio == "" {
			prio, val = j.priority, a.p.Priorities[j.priority].Value
		}
		qw.KueueMessage = kueueMessage(j.wl)
		w = &admission.Workload{Name: "Workflow " + j.wf.Name, Queue: qw.Queue, Priority: prio, Value: val, Request: req}
		aheadWLs = a.ahead(j.wl, qw.Queue, val)
		qw.Ahead = len(aheadWLs)
	} else {
		t := j.variant.Template
		qw.Queue = t.Queue
		w = &admission.Workload{Name: "Workflow " + j.wf.Name, Queue: t.Queue, Priority: j.priority, Value: a.p.Priorities[j.priority].Value, Request: t.Request}
		v.Evidence = append(v.Evidence, fmt.Sprintf("pod %s/%s carries Kueue's scheduling gate; its Workload is not created yet", j.pod.Namespace, j.pod.Name))
	}
	if _, ok := a.p.Queues[qw.Queue]; !ok {
		v.Summary = fmt.Sprintf("Kueue holds its pod in ClusterQueue %q, which the policy does not define", qw.Queue)
		v.Reason, v.Stuck = ReasonQuota, true
		v.Until = Until{Kind: UntilUnknown, Words: "unknown: the queue is not the policy's"}
		return
	}
	w.Card = j.variant.Template.Card
	qw.Card = w.Card
	w = a.snap.NewWorkload(*w)
	for _, k := range policy.Kinds {
		if r := w.Request.Get(k); r > 0 {
			res := a.p.Resource(k)
			qw.Request[res] = k.QuantityString(r)
			qw.Available[res] = k.QuantityString(a.snap.Available(qw.Queue, admission.FlavorResource{Card: w.Card, Kind: k}))
		}
	}
	d := a.snap.Decide(w)
	short := map[policy.Kind]bool{}
	for _, fr := range d.Short {
		qw.Binding = append(qw.Binding, a.p.Resource(fr.Kind))
		short[fr.Kind] = true
	}
	qw.Holders = a.quotaHolders(qw.Queue, short)
	if j.wl != nil {
		v.Evidence = append(v.Evidence, fmt.Sprintf("Workload %s/%s: QuotaReserved false%s", j.wl.Namespace, j.wl.Name, quoted(qw.KueueMessage)))
	}
	v.Evidence = append(v.Evidence, fmt.Sprintf("pod %s/%s is Pending behind Kueue's scheduling gate: its time limit has not started", j.pod.Namespace, j.pod.Name))
	bindWords := a.bindingWords(w, qw)
	switch d.Outcome {
	case admission.Admit:
		v.Reason = ReasonQuota
		qw.Preemption = "not needed: it fits now"
		if qw.Ahead > 0 {
			v.Summary = fmt.Sprintf("fits in %s now; %d Workload(s) ahead of it in Kueue's order are admitted first", qw.Queue, qw.Ahead)
		} else {
			v.Summary = fmt.Sprintf("fits in %s now: Kueue admits it at its next pass", qw.Queue)
		}
		v.Until = Until{Kind: UntilPreemption, At: ptr(a.now), Words: "now: Kueue's next scheduling pass"}
		return
	case admission.NoFit:
		v.Reason, v.Stuck = ReasonNeverFits, true
		qw.Preemption = "none: no preemption makes room the queue can never hold"
		v.Summary = fmt.Sprintf("asks more than %s can ever hold (%s): Kueue never admits it", qw.Queue, bindWords)
		v.Until = Until{Kind: UntilNever, Words: "indefinitely: the request exceeds the queue's nominal quota plus what it may borrow"}
		return
	case admission.Preempt:
		var ev []string
		for _, t := range d.Targets {
			ev = append(ev, fmt.Sprintf("%s (%s)", t.Workload.Name, admission.PolicyOf(t.Reason)))
		}
		v.Reason = ReasonPreempting
		qw.Preemption = "Kueue admits it by evicting " + strings.Join(ev, ", ")
		v.Summary = fmt.Sprintf("%s is short of %s; Kueue evicts %s to admit it", qw.Queue, bindWords, strings.Join(ev, ", "))
		v.Until = Until{Kind: UntilPreemption, At: ptr(a.now), Words: "seconds: the eviction is under way"}
		return
	}
	qw.Preemption = a.noPreemption(w, qw)
	var ahead []*admission.Workload
	for _, x := range aheadWLs {
		req, card := a.request(x)
		if card == "" {
			card = w.Card
		}
		prio, val := a.priorityOf(x)
		ahead = append(ahead, a.snap.NewWorkload(admission.Workload{Name: "Workload " + x.Namespace + "/" + x.Name, Queue: qw.Queue, Card: card, Priority: prio, Value: val, Request: req}))
	}
	var released []*holder
	v.Until, released = a.freedBy(w, ahead)
	if a.nextInLine(w, qw, v.Until, released) {
		a.nextInKueue(v, w, qw, released, bindWords)
		return
	}
	v.Reason = ReasonQuota
	v.Stuck = v.Until.Kind != UntilTimeLimit || a.overdue(v.Until)
	var hold []string
	for _, h := range qw.Holders {
		hold = append(hold, h.Name+" "+usesWords(h.Uses))
	}
	v.Summary = fmt.Sprintf("Kueue holds it: %s is short of %s, held by %s; %s; free %s",
		qw.Queue, bindWords, orNone(strings.Join(firstN(hold, 6), ", ")), qw.Preemption, v.Until.Words)
}

// Kueue's reasons for holding a Workload, read from its QuotaReserved
// condition's message (sigs.k8s.io/kueue v0.17.0: fitsResourceQuota in
// pkg/scheduler/flavorassigner/flavorassigner.go, Scheduler.schedule in
// pkg/scheduler/scheduler.go).
const (
	// kueueInUse: flavorassigner.fitsResourceQuota's wait/preempt branch,
	// "insufficient unused quota for R in flavor F, N more needed": the
	// request fits the queue's nominal quota plus what it may borrow, and
	// is short only because others use it.
	kueueInUse = "insufficient unused quota"
	// kueueNoFit: fitsResourceQuota's no-fit branch, "insufficient quota
	// for R in flavor F, previously considered podsets requests (…) +
	// current podset request (…) > maximum capacity (…)": it can never fit.
	kueueNoFit = "> maximum capacity"
	// kueueSkipped: Scheduler.schedule skipped it because another Workload
	// admitted in the same pass took the room: "Workload no longer fits
	// after processing another workload".
	kueueSkipped = "no longer fits after processing another workload"
	// kueuePreempting: Scheduler.schedule issued evictions for it:
	// ". Pending the preemption of N workload(s)".
	kueuePreempting = "Pending the preemption of"
)

// nextInLine reports whether a Workload Kueue holds is simply next in line:
// Kueue says the quota is in use, not too small, and evicts nothing for it
// (kueueInUse or kueueSkipped, never kueueNoFit or kueuePreempting; no
// message yet is read from the model alone), and what it waits for is the
// end of running jobs of its own ClusterQueue (their time limits), which
// hold the binding resources within the queue's nominal quota (the queue
// borrows none of them).
func (a *analyzer) nextInLine(w *admission.Workload, qw *QuotaWait, u Until, released []*holder) bool {
	msg := qw.KueueMessage
	if strings.Contains(msg, kueueNoFit) || strings.Contains(msg, kueuePreempting) {
		return false
	}
	if msg != "" && !strings.Contains(msg, kueueInUse) && !strings.Contains(msg, kueueSkipped) {
		return false
	}
	if u.Kind != UntilTimeLimit || len(released) == 0 {
		return false
	}
	for _, h := range released {
		if h.job == nil || h.w.Queue != w.Queue {
			return false
		}
	}
	for _, k := range policy.Kinds {
		if slices.Contains(qw.Binding, a.p.Resource(k)) && a.snap.Borrowing(w.Queue, admission.FlavorResource{Card: w.Card, Kind: k}) {
			return false
		}
	}
	return true
}

// nextInKueue fills the verdict of a job that is next in line in Kueue.
// It is stuck only when the end that should have freed it is past by more
// than the hand-off allowance.
func (a *analyzer) nextInKueue(v *Verdict, w *admission.Workload, qw *QuotaWait, released []*holder, bindWords string) {
	v.Reason = ReasonNextInLine
	var ends []string
	for _, h := range released {
		ends = append(ends, fmt.Sprintf("%s (time limit at %s)", h.w.Name, a.clock(*h.end)))
	}
	v.Evidence = append(v.Evidence, fmt.Sprintf("running jobs of %s hold %s within its nominal quota; it is admitted when %s ends",
		w.Queue, strings.Join(qw.Binding, ", "), strings.Join(ends, ", then ")))
	ahead := ""
	if qw.Ahead > 0 {
		ahead = fmt.Sprintf(", after the %d Workload(s) ahead of it in Kueue's order", qw.Ahead)
	}
	v.Summary = fmt.Sprintf("next in line in Kueue: %s is short of %s, used within its nominal quota by running jobs of its own queue; it starts when %s ends%s",
		w.Queue, bindWords, v.Until.By, ahead)
	if a.overdue(v.Until) {
		v.Stuck = true
		v.Summary = fmt.Sprintf("waits longer than the policy predicts: %s should have freed %s at %s (%s ago) and Kueue still holds it",
			v.Until.By, w.Queue, a.clock(*v.Until.At), a.now.Sub(*v.Until.At).Round(time.Second))
	}
}

func ptr(t time.Time) *time.Time { return &t }

func orNone(s string) string {
	if s == "" {
		return "nothing admitted"
	}
	return s
}

func firstN(ss []string, n int) []string {
	if len(ss) <= n {
		return ss
	}
	return append(ss[:n:n], fmt.Sprintf("%d more", len(ss)-n))
}

func quoted(msg string) string {
	if msg == "" {
		return ""
	}
	return ": \"" + msg + "\""
}

func kueueMessage(w *kueue.Workload) string {
	if c := meta.FindStatusCondition(w.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil && c.Status != metav1.ConditionTrue {
		return c.Message
	}
	return ""
}

// ahead lists the pending Workloads of the queue that Kueue orders before
// w, in that order (pkg/cache/queue/cluster_queue.go baseCompareFunc:
// higher priority first, then the earlier creation; Kueue's queue-order
// timestamp is the creation time unless the Workload was evicted).
func (a *analyzer) ahead(w *kueue.Workload, queue string, val int32) []*kueue.Workload {
	var out []*kueue.Workload
	for i := range a.o.Workloads {
		x := &a.o.Workloads[i]
		if x == w || holdsQuota(x) || meta.IsStatusConditionTrue(x.Status.Conditions, kueue.WorkloadFinished) || a.queueOf(x) != queue {
			continue
		}
		_, xv := a.priorityOf(x)
		if xv > val || xv == val && x.CreationTimestamp.Before(&w.CreationTimestamp) {
			out = append(out, x)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		_, vi := a.priorityOf(out[i])
		_, vj := a.priorityOf(out[j])
		if vi != vj {
			return vi > vj
		}
		return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp)
	})
	return out
}

// bindingWords: "gpupolicy.dev/gpu-memory (asks 1,024 MiB, 404 MiB left)".
func (a *analyzer) bindingWords(w *admission.Workload, qw *QuotaWait) string {
	var parts []string
	for _, k := range policy.Kinds {
		res := a.p.Resource(k)
		if !slices.Contains(qw.Binding, res) {
			continue
		}
		left := a.snap.Available(qw.Queue, admission.FlavorResource{Card: w.Card, Kind: k})
		parts = append(parts, fmt.Sprintf("%s (asks %s, %s left)", res, policy.FormatAmount(k, w.Request.Get(k)), policy.FormatAmount(k, left)))
	}
	return strings.Join(parts, ", ")
}

func usesWords(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return "(" + strings.Join(parts, " ") + ")"
}

// quotaHolders lists the admitted Workloads in the queue's cohort that use
// the short kinds.
func (a *analyzer) quotaHolders(queue string, short map[policy.Kind]bool) []QuotaHolder {
	cohort := a.snap.CohortQueues(queue)
	var out []QuotaHolder
	for _, h := range a.holders {
		if !slices.Contains(cohort, h.w.Queue) {
			continue
		}
		qh := QuotaHolder{Name: h.w.Name, Service: h.service, Queue: h.w.Queue, Priority: h.w.Priority, Uses: map[string]string{}}
		if h.job != nil {
			qh.Workflow = h.job.wf.Name
		}
		for k := range short {
			if v := h.w.Request.Get(k); v > 0 {
				qh.Uses[a.p.Resource(k)] = k.QuantityString(v)
				if a.snap.Borrowing(h.w.Queue, admission.FlavorResource{Card: h.w.Card, Kind: k}) {
					qh.Borrowing = true
				}
			}
		}
		if len(qh.Uses) > 0 {
			out = append(out, qh)
		}
	}
	// Borrowers first (what the job most often waits on), then by name.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Borrowing && !out[j].Borrowing })
	return out
}

// noPreemption says why no preemption path applies at the job's priority.
func (a *analyzer) noPreemption(w *admission.Workload, qw *QuotaWait) string {
	q := a.p.Queues[w.Queue]
	var lower []string
	for _, h := range qw.Holders {
		if a.p.Priorities[h.Priority].Value < w.Value {
			lower = append(lower, h.Name)
		}
	}
	pre := q.Preemption
	if len(lower) == 0 {
		return fmt.Sprintf("no preemption path at %s (%d): nothing that holds the quota has a lower priority", w.Priority, w.Value)
	}
	return fmt.Sprintf("no preemption path at %s (%d): Kueue may not evict %s (withinClusterQueue %s, reclaimWithinCohort %s in %s; a queue within its nominal quota is never reclaimed from)",
		w.Priority, w.Value, strings.Join(lower, ", "), orNever(pre.WithinClusterQueue), orNever(pre.ReclaimWithinCohort), w.Queue)
}

func orNever(s string) string {
	if s == "" {
		return "Never"
	}
	return s
}

// freedBy finds the earliest event that lets w in: the holders with an end
// (a running job's time limit, an on-demand service's scale-down) are
// removed from the model in the order they end until w fits. After each
// removal the Workloads ahead of w in Kueue's order (ahead, in that order)
// take the room first when they fit, as Kueue's BestEffortFIFO heads them
// (pkg/cache/queue/cluster_queue.go baseCompareFunc: higher priority first,
// then the earlier queue-order timestamp). It returns the Until and the
// holders whose end it waited for.
func (a *analyzer) freedBy(w *admission.Workload, ahead []*admission.Workload) (Until, []*holder) {
	var ends []*holder
	for _, h := range a.holders {
		if h.end != nil {
			ends = append(ends, h)
		}
	}
	sort.SliceStable(ends, func(i, j int) bool { return ends[i].end.Before(*ends[j].end) })
	var removed []*holder
	var placed []*admission.Workload
	defer func() {
		for _, x := range placed {
			a.snap.Remove(x)
		}
		for _, h := range removed {
			a.snap.Add(h.w)
		}
	}()
	for _, h := range ends {
		a.snap.Remove(h.w)
		removed = append(removed, h)
		for _, x := range ahead {
			if !slices.Contains(placed, x) && a.snap.Fits(x) {
				a.snap.Add(x)
				placed = append(placed, x)
			}
		}
		d := a.snap.Decide(w)
		if d.Outcome == admission.Admit || d.Outcome == admission.Preempt {
			u := Until{Kind: h.endKind, At: utc(h.end), By: h.endBy}
			switch h.endKind {
			case UntilScaleDown:
				u.WhileRequestsArrive = true
				u.Words = fmt.Sprintf("when %s (%s), and indefinitely while requests keep arriving: its time limit does not count while it waits", h.endWhat, a.in_(*h.end))
			default:
				u.Words = fmt.Sprintf("at the latest at %s (%s), when %s; sooner if a job ends", a.clock(*h.end), a.in_(*h.end), h.endWhat)
				if len(placed) > 0 {
					u.Words = fmt.Sprintf("at the latest at %s (%s), when %s, after the %d Workload(s) ahead of it take the room freed before; sooner if jobs end", a.clock(*h.end), a.in_(*h.end), h.endWhat, len(placed))
				}
			}
			return u, append([]*holder(nil), removed...)
		}
	}
	return Until{Kind: UntilNever, Words: "indefinitely: what holds the quota has no end the policy bounds (always-on services, or jobs with no time limit)"}, nil
}

// handOffAllowance is how long past the end that should free a job status
// waits before it calls the job stuck beyond the prediction: Kueue admits
// the next Workload within seconds of a release (the write-up: two held
// jobs admitted "within 7 s" of the 7B's scale-down; "admission the same
// second"), and a pod past its time limit takes a few seconds to end and
// release its quota.
const handOffAllowance = time.Minute

// overdue reports whether an Until's time has passed by more than the
// hand-off allowance.
func (a *analyzer) overdue(u Until) bool {
	return u.At != nil && u.At.Add(handOffAllowance).Before(a.now)
}

// newVerdict starts a job's verdict.
func (a *analyzer) newVerdict(j *job, where string) *Verdict {
	return &Verdict{Workflow: j.wf.Name, Namespace: j.wf.Namespace, Template: j.variant.Name, Priority: j.priority, Where: where, Evidence: []string{}}
}

// nodeVerdict: Kueue admitted the job; the scheduler finds no node.
func (a *analyzer) nodeVerdict(j *job) {
	v := a.newVerdict(j, OnNode)
	j.verdict = v
	msg := unschedulable(j.pod)
	nw := &NodeWait{Message: msg, Events: []string{}, Outside: []string{}}
	v.Node = nw
	for _, e := range a.o.Events {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Namespace == j.pod.Namespace && e.InvolvedObject.Name == j.pod.Name && e.Reason == "FailedScheduling" {
			nw.Events = append(nw.Events, fmt.Sprintf("%s (%s, ×%d)", e.Message, orDefault(e.Source.Component, e.ReportingController), max(1, e.Count)))
		}
	}
	shares := corev1.ResourceName(a.p.Resource(policy.Shares))
	for _, pod := range a.o.Pods {
		if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, managed := pod.Labels[contract.LabelKueueQueue]; managed {
			continue
		}
		if q := podRequests(&pod)[shares]; q.Sign() > 0 {
			nw.Outside = append(nw.Outside, fmt.Sprintf("pod %s/%s on node %s takes %s %s outside Kueue", pod.Namespace, pod.Name, pod.Spec.NodeName, q.String(), shares))
		}
	}
	v.Reason, v.Stuck = ReasonUnschedulable, true
	v.Evidence = append(v.Evidence, fmt.Sprintf("Workload %s holds quota: Kueue admitted it", wlName(j.wl)),
		fmt.Sprintf("pod %s/%s: PodScheduled false (Unschedulable): %q", j.pod.Namespace, j.pod.Name, msg))
	v.Evidence = append(v.Evidence, nw.Events...)
	v.Evidence = append(v.Evidence, nw.Outside...)
	why := msg
	if len(nw.Outside) > 0 {
		why += "; " + strings.Join(nw.Outside, "; ")
	}
	v.Summary = fmt.Sprintf("Kueue admitted it but no node can take its pod: %s", why)
	v.Until = Until{Kind: UntilNever, Words: "indefinitely: nothing the policy controls frees the node (the quota says it fits; the node disagrees)"}
}

func wlName(w *kueue.Workload) string {
	if w == nil {
		return "(none)"
	}
	return w.Namespace + "/" + w.Name
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func (a *analyzer) lockSize(l string) int64 {
	if n, ok := a.o.LockSizes[l]; ok {
		return n
	}
	return a.p.Locks[l].Size
}

// lockVerdict: the job waits at an Argo lock.
func (a *analyzer) lockVerdict(j *job) {
	v := a.newVerdict(j, AtLock)
	j.verdict = v
	lw := &LockWait{Lock: j.waitLock, Size: a.lockSize(j.waitLock), Holders: []LockHolder{}}
	v.Lock = lw
	var held []*job
	for _, o := range a.jobs {
		if slices.Contains(o.holds, j.waitLock) {
			held = append(held, o)
		}
	}
	for _, o := range a.jobs {
		if o.state == "lock" && o.waitLock == j.waitLock {
			lw.Position++
			if o == j {
				break
			}
		}
	}
	var kueueHeld []*job
	var earliest *job
	for _, o := range held {
		st := map[string]string{"running": "running", "kueue": "held by Kueue", "node": "pending on a node", "starting": "starting", "lock": "waiting at another lock"}[o.state]
		lw.Holders = append(lw.Holders, LockHolder{Workflow: o.wf.Name, State: st})
		if o.state == "kueue" {
			kueueHeld = append(kueueHeld, o)
		}
		if o.deadline != nil && (earliest == nil || o.deadline.Before(*earliest.deadline)) {
			earliest = o
		}
	}
	lw.HeldByKueue = len(kueueHeld)
	// What Kueue would do with the job past the lock.
	t := j.variant.Template
	w := a.snap.NewWorkload(admission.Workload{Name: "Workflow " + j.wf.Name, Queue: t.Queue, Card: t.Card, Priority: j.priority, Value: a.p.Priorities[j.priority].Value, Request: t.Request})
	if _, ok := a.p.Queues[t.Queue]; ok {
		lw.KueueWould = a.snap.Decide(w).Outcome.String()
	}
	var names []string
	for _, h := range lw.Holders {
		names = append(names, h.Workflow+" ("+h.State+")")
	}
	v.Evidence = append(v.Evidence, fmt.Sprintf("Workflow %s waits for lock %s: %d of %d slots held by %s", j.wf.Name, lw.Lock, len(held), lw.Size, orNone(strings.Join(names, ", "))))
	if len(kueueHeld) > 0 {
		v.Reason, v.Stuck = ReasonLockCapacity, true
		// The holders move when Kueue admits them: the earliest of their
		// own untils.
		var u *Until
		for _, o := range kueueHeld {
			if o.verdict != nil && (u == nil || earlier(o.verdict.Until, *u)) {
				uu := o.verdict.Until
				u = &uu
			}
		}
		if u == nil {
			u = &Until{Kind: UntilUnknown, Words: "unknown"}
		}
		v.Until = *u
		v.Until.Words = "when Kueue admits a holder: " + u.Words
		would := map[string]string{
			"admit":   "Kueue would admit it now",
			"preempt": "Kueue would admit it now by preemption",
			"wait":    "Kueue would hold it too",
			"no-fit":  "Kueue could never admit it",
		}[lw.KueueWould]
		v.Summary = fmt.Sprintf("waits at lock %s: %d of its %d slots are held by jobs whose pods Kueue holds (the lock is larger than what the queue admits now); %s if it got past the lock",
			lw.Lock, len(kueueHeld), lw.Size, would)
		return
	}
	v.Reason = ReasonNextInLine
	if earliest != nil {
		v.Until = Until{Kind: UntilTimeLimit, At: utc(earliest.deadline), By: "Workflow " + earliest.wf.Name,
			Words: fmt.Sprintf("at the latest at %s (%s), when Workflow %s reaches its time limit; sooner when any holder ends", a.clock(*earliest.deadline), a.in_(*earliest.deadline), earliest.wf.Name)}
	} else {
		v.Until = Until{Kind: UntilUnknown, Words: "when a holder ends (no holder's time limit is known)"}
	}
	v.Summary = fmt.Sprintf("next in line: %s at lock %s, whose %d slots are held by running jobs; %s",
		ordinal(lw.Position), lw.Lock, lw.Size, v.Until.Words)
	if a.overdue(v.Until) {
		v.Stuck = true
		v.Summary = fmt.Sprintf("waits longer than the policy predicts: Workflow %s's time limit ended at %s (%s ago) and it still holds lock %s",
			earliest.wf.Name, a.clock(*v.Until.At), a.now.Sub(*v.Until.At).Round(time.Second), lw.Lock)
	}
}

func earlier(x, y Until) bool {
	if x.At == nil {
		return false
	}
	return y.At == nil || x.At.Before(*y.At)
}

func ordinal(n int) string {
	switch n {
	case 1:
		return "first"
	case 2:
		return "second"
	case 3:
		return "third"
	}
	return fmt.Sprintf("%dth", n)
}

// locks fills the lock slots in use.
func (a *analyzer) locks() {
	for _, l := range a.p.LockNames() {
		lu := LockUsage{Lock: l, Size: a.lockSize(l), Holders: []string{}}
		for _, j := range a.jobs {
			if slices.Contains(j.holds, l) {
				lu.Held++
				lu.Holders = append(lu.Holders, j.wf.Name)
			}
			if j.state == "lock" && j.waitLock == l {
				lu.Waiting++
			}
		}
		a.rep.Locks = append(a.rep.Locks, lu)
	}
}

// compare sets the running count against explain's prediction.
func (a *analyzer) compare() {
	if a.in.Predict == nil {
		return
	}
	type tp struct{ t, p string }
	count := map[tp]*Comparison{}
	var order []tp
	for _, j := range a.jobs {
		k := tp{j.variant.Name, j.priority}
		c := count[k]
		if c == nil {
			c = &Comparison{Template: k.t, Priority: k.p}
			count[k] = c
			order = append(order, k)
		}
		switch {
		case j.state == "running":
			c.Running++
		case j.verdict != nil:
			c.Waiting++
		}
	}
	for _, k := range order {
		c := count[k]
		pred, err := a.in.Predict(k.t, k.p, a.o.State)
		if err != nil {
			a.rep.Notes = append(a.rep.Notes, err.Error())
			continue
		}
		c.Predicted = pred.Admitted
		c.Agrees = c.Waiting == 0 || c.Running >= c.Predicted
		lead := fmt.Sprintf("%s at %s, %s: running %d of a predicted %d (%s)", k.t, k.p, a.o.State.Label(), c.Running, c.Predicted, pred.Why())
		if !c.Agrees {
			lead += fmt.Sprintf(": %d wait while %d more could run; see their verdicts", c.Waiting, c.Predicted-c.Running)
		} else if c.Waiting > 0 {
			lead += fmt.Sprintf(", %d waiting", c.Waiting)
		}
		c.Words = lead
		a.rep.Predictions = append(a.rep.Predictions, *c)
	}
	// A job that waits while fewer run than predicted is stuck beyond the
	// policy's prediction.
	for i := range a.rep.Waiting {
		v := &a.rep.Waiting[i]
		if c := count[tp{v.Template, v.Priority}]; c != nil && !c.Agrees {
			v.Stuck = true
		}
	}
}

// Stuck reports whether a job is starved or stuck beyond what the policy
// predicts (exit status 1).
func (r *Report) IsStuck() bool { return r.Stuck > 0 }
