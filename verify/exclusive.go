package verify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// The exclusive batch (Options.Exclusive): as many jobs as the queue
// admits in the observed service state go first, through the batch's
// template at its priority; once they run, one job of the policy's
// exclusive template (schema #Template.exclusive) follows at that
// template's own priority. Every poll, verify also lists the Kueue
// Workloads and the GPU pods in the namespaces of every ClusterQueue with
// quota on the exclusive template's card, and keeps, per Workload, when it
// held quota (QuotaReserved's transition to true, to Finished's or
// QuotaReserved's transition to false) and, per pod, when its containers
// ran (the container statuses' startedAt and finishedAt). At the end it
// checks from those records that nothing held quota while the exclusive
// job's Workload did, and no other GPU pod ran while its container did,
// apart from the always-on services, whose quota the exclusive request
// leaves them. Stamps have the API server's one-second resolution: two
// spans that only touch within a second are not counted as overlapping,
// and a Workload or pod that vanished between two polls is counted only
// if a poll saw it beside the exclusive job.

// ExclusiveBatch is the exclusive batch's kind.
const ExclusiveBatch BatchKind = "exclusive"

// The exclusive batch's checks.
const (
	CheckExclusiveBeside   = "ran-beside-exclusive"
	CheckExclusiveNotRun   = "exclusive-not-run"
	CheckExclusiveModelled = "exclusive-not-as-modelled"
)

func init() {
	Checks = append(Checks,
		verifyRule(CheckExclusiveBeside, "something held quota on the exclusive job's card, or ran a GPU pod there, while the exclusive job did: the policy's exclusive template promises the card to itself (the always-on services aside)"),
		verifyRule(CheckExclusiveNotRun, "the exclusive job verify submitted into a running batch was never admitted, or did not finish"),
		verifyRule(CheckExclusiveModelled, "the exclusive job evicted running jobs where the admission model says it waits for them, or waited where it says it evicts them"),
	)
}

// ExclusiveRun is the exclusive batch: its exclusive job and what the
// cluster's own records say ran beside it. Times are the API server's
// (one-second resolution) except Submitted.
type ExclusiveRun struct {
	// Job is the exclusive job's Workflow; Template and Priority what it
	// ran through and at; Jobs the policy's word on running jobs ("wait"
	// or "evict").
	Job      string `json:"job"`
	Template string `json:"template"`
	Priority string `json:"priority"`
	Jobs     string `json:"jobs"`
	// Card is the card, Queues the ClusterQueues with quota on it and
	// Namespaces theirs: what verify watched.
	Card       string   `json:"card"`
	Queues     []string `json:"queues"`
	Namespaces []string `json:"namespaces"`
	// Submitted is when verify submitted it; RunningAtSubmit the batch's
	// jobs running then.
	Submitted       time.Time `json:"submitted"`
	RunningAtSubmit []string  `json:"runningAtSubmit"`
	// Admitted is its Workload's QuotaReserved, Released its Finished;
	// Started and Ended its container's start and end.
	Admitted time.Time `json:"admitted,omitzero"`
	Started  time.Time `json:"started,omitzero"`
	Ended    time.Time `json:"ended,omitzero"`
	Released time.Time `json:"released,omitzero"`
	Outcome  Outcome   `json:"outcome"`
	// Evicted lists the batch's jobs whose Workload Kueue evicted
	// (Evicted, reason Preempted) during the batch; Rerun those of them
	// whose step held quota again (Argo retried it: a new pod and
	// Workload) once the exclusive job's quota was released.
	Evicted []string `json:"evicted"`
	Rerun   []string `json:"rerun"`
	// Beside lists what held quota or ran a GPU pod on the card while the
	// exclusive job did (empty: the guarantee held); AlwaysOn the
	// always-on services' Workloads and pods that did, as the policy
	// leaves them.
	Beside   []Record `json:"beside"`
	AlwaysOn []string `json:"alwaysOn"`
	// WorkloadsSeen and PodsSeen count what the watch recorded.
	WorkloadsSeen int `json:"workloadsSeen"`
	PodsSeen      int `json:"podsSeen"`
	// Predicted is the admission model's word for the batch's service
	// state (admission.Exclusives): "evicts" or "waits" for the running
	// batch jobs, "" when it has no row for them; PredictedBeside what it
	// says Kueue admits beside the exclusive job there.
	Predicted       string   `json:"predicted"`
	PredictedBeside []string `json:"predictedBeside"`
	// ResolutionSeconds is the stamps' resolution (the API server's).
	ResolutionSeconds float64 `json:"resolutionSeconds"`
}

// Record is one Workload's quota span or one GPU pod's run, as the
// cluster recorded it.
type Record struct {
	// Kind is "Workload" or "Pod".
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Queue is a Workload's ClusterQueue.
	Queue string `json:"queue,omitempty"`
	// From and To bound it (QuotaReserved to Finished for a Workload,
	// first container start to last container end for a pod); To is zero
	// while it still held or ran at the last poll, or when it vanished
	// between two polls (Vanished).
	From     time.Time `json:"from"`
	To       time.Time `json:"to,omitzero"`
	Vanished bool      `json:"vanished,omitempty"`
	// SeenBeside: a poll saw it hold quota (run) while the exclusive job's
	// Workload did (its container ran).
	SeenBeside bool `json:"seenBeside"`

	uid     types.UID
	owner   string // a Workload's owner (its pod)
	service string // the always-on service it belongs to
	evicted bool
}

// exclusiveWatch is the runner's state for the exclusive batch.
type exclusiveWatch struct {
	t          policy.Template
	p          *policy.Policy
	queues     map[string]bool
	namespaces []string
	wls, pods  map[types.UID]*Record
}

// newExclusiveWatch picks the exclusive template (the named one, or the
// policy's only one) and what to watch. The template must run in ns, the
// namespace of the batch's template, so that one Workflow list sees both.
func newExclusiveWatch(p *policy.Policy, name, ns string) (*exclusiveWatch, error) {
	var names []string
	for _, n := range p.TemplateNames() {
		if p.Templates[n].Exclusive != nil {
			names = append(names, n)
		}
	}
	switch {
	case len(names) == 0:
		return nil, errors.New("verify --exclusive: the policy has no exclusive template (templates.NAME.exclusive)")
	case name == "" && len(names) > 1:
		return nil, fmt.Errorf("verify --exclusive: the policy has %d exclusive templates (%s): name one with --exclusive-template", len(names), strings.Join(names, ", "))
	case name == "":
		name = names[0]
	case !slices.Contains(names, name):
		return nil, fmt.Errorf("verify --exclusive-template %q: not an exclusive template of the policy (exclusive: %s)", name, strings.Join(names, ", "))
	}
	if !p.Templates[name].Exclusive.Sized {
		sized, fs := admission.SizeExclusive(p)
		if len(fs) > 0 {
			return nil, fmt.Errorf("verify --exclusive: %s", fs[0].String())
		}
		p = sized
	}
	t := p.Templates[name]
	if ns != "" && t.Namespace != ns {
		return nil, fmt.Errorf("verify --exclusive: template %s runs in namespace %s, the batch's template in %s: verify watches one namespace's Workflows", name, t.Namespace, ns)
	}
	w := &exclusiveWatch{t: t, p: p, queues: map[string]bool{}, wls: map[types.UID]*Record{}, pods: map[types.UID]*Record{}}
	watched := map[string]bool{}
	for _, q := range p.QueueNames() {
		if _, ok := p.Queues[q].Flavors[t.Card]; ok {
			w.queues[q] = true
			for _, n := range p.Queues[q].Namespaces {
				watched[n] = true
			}
		}
	}
	w.namespaces = slices.Sorted(maps.Keys(watched))
	return w, nil
}

// exclusiveWorkflow turns the batch's last Workflow into the exclusive
// job: the exclusive template by reference at its own priority.
func (r *runner) exclusiveWorkflow(b *Batch, wf *wfv1.Workflow) {
	x := r.ex
	wf.Spec.WorkflowTemplateRef = &wfv1.WorkflowTemplateRef{Name: x.t.Name}
	wf.Spec.Arguments.Parameters = []wfv1.Parameter{{Name: contract.ParamPriority, Value: wfv1.AnyStringPtr(x.t.Priority)}}
	run := &ExclusiveRun{Job: wf.Name, Template: x.t.Name, Priority: x.t.Priority, Jobs: x.t.Exclusive.Jobs,
		Submitted: r.now(), RunningAtSubmit: []string{}, Evicted: []string{}, Rerun: []string{}, Beside: []Record{}, AlwaysOn: []string{},
		PredictedBeside: []string{}, ResolutionSeconds: HandoffResolutionSeconds}
	for _, j := range b.Jobs {
		if !j.Started().IsZero() && j.Ended.IsZero() {
			run.RunningAtSubmit = append(run.RunningAtSubmit, j.Name)
		}
	}
	b.Exclusive = run
}

// exclusiveDue: every job submitted so far runs or has ended, and one
// runs; or one has run for 30 s (a job the queue does not admit must not
// keep the exclusive one back).
func (r *runner) exclusiveDue(b *Batch, states []*jobState) bool {
	now := r.now()
	running, all := 0, true
	var first time.Time
	for i, s := range states {
		if !s.seenRunning.IsZero() && b.Jobs[i].Ended.IsZero() {
			running++
			if first.IsZero() || s.seenRunning.Before(first) {
				first = s.seenRunning
			}
		} else if b.Jobs[i].Ended.IsZero() {
			all = false
		}
	}
	return running > 0 && (all || now.Sub(first) >= 30*time.Second)
}

// exclusiveObserve records, once per poll, the Workloads that hold quota
// in the watched ClusterQueues and the GPU pods in their namespaces, and
// marks those seen while the exclusive job held quota (ran).
func (r *runner) exclusiveObserve(ctx context.Context, b *Batch) error {
	x := r.ex
	now := r.now()
	var xJob *Job
	if b.Exclusive != nil {
		if i := slices.IndexFunc(b.Jobs, func(j Job) bool { return j.Name == b.Exclusive.Job }); i >= 0 {
			xJob = &b.Jobs[i]
		}
	}
	listedWL, listedPod := map[types.UID]bool{}, map[types.UID]bool{}
	var holding, running []*Record
	xHolds, xRuns := false, false
	for _, ns := range x.namespaces {
		wls, err := ListWorkloads(ctx, r.c, ns)
		if err != nil {
			return fmt.Errorf("verify: listing Workloads in %s: %w", ns, err)
		}
		for i := range wls {
			w := &wls[i]
			rec, held := x.workload(w, now)
			if rec == nil {
				continue
			}
			listedWL[w.UID] = true
			if held {
				if xJob != nil && w.Name == xJob.Workload {
					xHolds = true
				} else {
					holding = append(holding, rec)
				}
			}
		}
		pods, err := listPods(ctx, r.c, ns)
		if err != nil {
			return fmt.Errorf("verify: listing pods in %s: %w", ns, err)
		}
		for i := range pods {
			pod := &pods[i]
			rec, runs := x.pod(pod)
			if rec == nil {
				continue
			}
			listedPod[pod.UID] = true
			if runs {
				if xJob != nil && pod.Name == xJob.Pod {
					xRuns = true
				} else {
					running = append(running, rec)
				}
			}
		}
	}
	for _, rec := range holding {
		rec.SeenBeside = rec.SeenBeside || xHolds
	}
	for _, rec := range running {
		rec.SeenBeside = rec.SeenBeside || xRuns
	}
	vanished(x.wls, listedWL)
	vanished(x.pods, listedPod)
	return nil
}

// vanished marks the records of a poll that no longer lists them and that
// had not ended.
func vanished(recs map[types.UID]*Record, listed map[types.UID]bool) {
	for uid, rec := range recs {
		if !listed[uid] && rec.To.IsZero() {
			rec.Vanished = true
		}
	}
}

// onCard reports whether an admission (nil: not known) assigned a
// ResourceFlavor that is the exclusive step's card: in a queue with
// several cards, a Workload admitted on another does not share it.
func (x *exclusiveWatch) onCard(a *kueue.Admission) bool {
	if a == nil || len(a.PodSetAssignments) == 0 {
		return true
	}
	for _, psa := range a.PodSetAssignments {
		for _, f := range psa.Flavors {
			if string(f) == x.t.Card {
				return true
			}
		}
	}
	return false
}

// otherCard reports whether a pod's nodeSelector pins it off the step's
// card: Kueue injects the assigned flavor's nodeLabels there, so a value
// that differs from the card's for one of its label keys is another card.
func (x *exclusiveWatch) otherCard(sel map[string]string) bool {
	for k, v := range x.p.Cards[x.t.Card].NodeLabels {
		if got, ok := sel[k]; ok && got != v {
			return true
		}
	}
	return false
}

// listPods lists a namespace's pods (the one cluster call of the pod
// watch).
func listPods(ctx context.Context, c Clients, ns string) ([]corev1.Pod, error) {
	return kube.List[corev1.Pod](ctx, c.Dynamic, kube.GVRPod, ns, metav1.ListOptions{})
}

// workload updates the record of a Workload in a watched ClusterQueue and
// says whether it holds quota now (holdsQuota); nil for one that never
// held quota there.
func (x *exclusiveWatch) workload(w *kueue.Workload, now time.Time) (*Record, bool) {
	cq, since, held := holdsQuota(w)
	rec := x.wls[w.UID]
	qr := meta.FindStatusCondition(w.Status.Conditions, kueue.WorkloadQuotaReserved)
	fin := meta.FindStatusCondition(w.Status.Conditions, kueue.WorkloadFinished)
	if rec == nil {
		// A Workload first seen finished held quota from its
		// reservation to its end, both on record.
		if !held && (fin == nil || fin.Status != metav1.ConditionTrue || qr == nil || qr.Status != metav1.ConditionTrue) {
			return nil, false
		}
		if w.Status.Admission != nil {
			cq = string(w.Status.Admission.ClusterQueue)
		}
		if !x.queues[cq] || !x.onCard(w.Status.Admission) {
			return nil, false
		}
		if !held {
			since = qr.LastTransitionTime.Time
		}
		rec = &Record{Kind: "Workload", Namespace: w.Namespace, Name: w.Name, Queue: cq, From: since, uid: w.UID, owner: ownerName(w),
			service: x.alwaysOnOf(w.Namespace, w.Name, ownerName(w))}
		x.wls[w.UID] = rec
	}
	if ev := meta.FindStatusCondition(w.Status.Conditions, kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue && ev.Reason == kueue.WorkloadEvictedByPreemption {
		rec.evicted = true
	}
	if !held && rec.To.IsZero() {
		switch {
		case fin != nil && fin.Status == metav1.ConditionTrue:
			rec.To = fin.LastTransitionTime.Time
		case qr != nil && qr.Status == metav1.ConditionFalse:
			rec.To = qr.LastTransitionTime.Time
		}
	}
	return rec, held
}

// pod updates the record of a pod that requests the card's shares and
// says whether a container of it runs now; nil for any other pod, and for
// one whose containers never started.
func (x *exclusiveWatch) pod(pod *corev1.Pod) (*Record, bool) {
	res := corev1.ResourceName(x.p.Resource(policy.Shares))
	gpu := false
	for _, c := range pod.Spec.Containers {
		if _, ok := c.Resources.Requests[res]; ok {
			gpu = true
		}
		if _, ok := c.Resources.Limits[res]; ok {
			gpu = true
		}
	}
	if !gpu || x.otherCard(pod.Spec.NodeSelector) {
		return nil, false
	}
	var from, to time.Time
	runs, ended := false, len(pod.Status.ContainerStatuses) > 0
	for _, cs := range pod.Status.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			runs, ended = true, false
			from = earliest(from, cs.State.Running.StartedAt.Time)
		case cs.State.Terminated != nil:
			if t := cs.State.Terminated; t.StartedAt.Before(&t.FinishedAt) {
				from = earliest(from, t.StartedAt.Time)
			}
			if cs.State.Terminated.FinishedAt.After(to) {
				to = cs.State.Terminated.FinishedAt.Time
			}
		default:
			ended = false
		}
	}
	rec := x.pods[pod.UID]
	if rec == nil {
		if from.IsZero() && !runs {
			return nil, false
		}
		rec = &Record{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, From: from, uid: pod.UID, service: x.alwaysOnOf(pod.Namespace, pod.Name, "")}
		x.pods[pod.UID] = rec
	}
	rec.From = earliest(rec.From, from)
	if ended && !runs && rec.To.IsZero() && !to.IsZero() {
		rec.To = to
	}
	return rec, runs
}

// alwaysOnOf names the always-on service a Workload or pod in ns belongs
// to (NamesService), or "".
func (x *exclusiveWatch) alwaysOnOf(ns string, names ...string) string {
	for _, n := range x.p.ServiceNames() {
		s := x.p.Services[n]
		if s.Mode != policy.AlwaysOn || s.Namespace != ns {
			continue
		}
		for _, o := range names {
			if o != "" && NamesService(o, n) {
				return n
			}
		}
	}
	return ""
}

// overlaps reports whether a record's span overlaps [from, to) by more
// than the stamps' resolution allows to call touching: a record still
// holding (running) at the last poll overlaps anything it began before.
func (rec *Record) overlaps(from, to time.Time) bool {
	if rec.SeenBeside {
		return true
	}
	if from.IsZero() || rec.From.IsZero() || !rec.From.Before(to) {
		return false
	}
	if rec.To.IsZero() {
		return !rec.Vanished
	}
	return rec.To.After(from)
}

// exclusiveFinish fills the exclusive batch's ExclusiveRun from its job's
// stamps and the watch's records, and the admission model's prediction
// for the batch's service state.
func (r *runner) exclusiveFinish(b *Batch) {
	x := b.Exclusive
	if b.Kind != ExclusiveBatch || r.ex == nil || x == nil {
		return
	}
	i := slices.IndexFunc(b.Jobs, func(j Job) bool { return j.Name == x.Job })
	if i < 0 {
		return
	}
	j := b.Jobs[i]
	x.Card, x.Queues, x.Namespaces = r.ex.t.Card, slices.Sorted(maps.Keys(r.ex.queues)), slices.Clone(r.ex.namespaces)
	x.Admitted, x.Started, x.Ended, x.Released, x.Outcome = j.Admitted, j.ContainerStarted, j.Ended, j.Released, j.Outcome
	qTo := x.Released
	if qTo.IsZero() {
		qTo = x.Ended
	}
	if qTo.IsZero() {
		qTo = b.Until
	}
	cTo := x.Ended
	if cTo.IsZero() {
		cTo = b.Until
	}
	x.Beside, x.AlwaysOn, x.Evicted, x.Rerun = []Record{}, []string{}, []string{}, []string{}
	// A job's Workloads: an evicted step's pod is deleted, and Argo's
	// retry makes a new pod, and Kueue a new Workload.
	jobOf := func(rec *Record) string {
		for _, o := range b.Jobs {
			if o.Name != x.Job && (rec.Name == o.Workload || rec.owner == o.Name || strings.HasPrefix(rec.owner, o.Name+"-") || strings.Contains(rec.Name, "-"+o.Name+"-")) {
				return o.Name
			}
		}
		return ""
	}
	add := func(rec *Record, from, to time.Time) {
		if !rec.overlaps(from, to) {
			return
		}
		if rec.service != "" {
			x.AlwaysOn = append(x.AlwaysOn, rec.Kind+" "+rec.Namespace+"/"+rec.Name)
			return
		}
		x.Beside = append(x.Beside, *rec)
	}
	for _, rec := range sortedRecords(r.ex.wls) {
		if rec.Name == j.Workload {
			continue
		}
		if job := jobOf(rec); job != "" && rec.evicted && !slices.Contains(x.Evicted, job) {
			x.Evicted = append(x.Evicted, job)
		}
		add(rec, x.Admitted, qTo)
	}
	// The evicted jobs that held quota again once it had let go of its own.
	for _, rec := range sortedRecords(r.ex.wls) {
		if job := jobOf(rec); slices.Contains(x.Evicted, job) && !rec.evicted && !rec.From.Before(qTo) && !slices.Contains(x.Rerun, job) {
			x.Rerun = append(x.Rerun, job)
		}
	}
	slices.Sort(x.Rerun)
	for _, rec := range sortedRecords(r.ex.pods) {
		if rec.Name != j.Pod {
			add(rec, x.Started, cTo)
		}
	}
	x.WorkloadsSeen, x.PodsSeen = len(r.ex.wls), len(r.ex.pods)
	slices.Sort(x.Evicted)
	r.exclusivePrediction(b)
}

func sortedRecords(m map[types.UID]*Record) []*Record {
	out := make([]*Record, 0, len(m))
	for _, rec := range m {
		out = append(out, rec)
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].From.Equal(out[b].From) {
			return out[a].From.Before(out[b].From)
		}
		return out[a].Namespace+"/"+out[a].Name < out[b].Namespace+"/"+out[b].Name
	})
	return out
}

// exclusivePrediction is the admission model's word (admission.Exclusives)
// on the batch's service state, with the always-on services the cluster
// lacks left out (WithoutServices), as the batch's own prediction is.
func (r *runner) exclusivePrediction(b *Batch) {
	x := b.Exclusive
	p := r.ex.p
	if len(b.State.AlwaysOnAbsent) > 0 {
		p = WithoutServices(p, b.State.AlwaysOnAbsent)
	}
	base := r.rep.Template
	if v, ok := r.p.Variant(r.rep.Template); ok {
		base = v.Template.Name
	}
	for _, e := range admission.Exclusives(p) {
		if e.Template != x.Template {
			continue
		}
		st, ok := e.StateOf(b.State.Up()...)
		if !ok {
			return
		}
		for _, row := range st.Running {
			if row.Template == base && row.Priority == r.o.Priority {
				x.Predicted = row.Outcome
			}
		}
		for _, bs := range st.Beside {
			x.PredictedBeside = append(x.PredictedBeside, bs.Workload+" at "+bs.Priority)
		}
	}
}

// exclusiveFindings are the exclusive batch's disagreements: the exclusive
// job not run, anything beside it, its evictions against the model's
// word, and a batch job that failed without being evicted.
func exclusiveFindings(b Batch) []finding.Finding {
	x := b.Exclusive
	label := b.Label()
	var out []finding.Finding
	add := func(id, job, format string, args ...any) {
		out = append(out, newFinding(id, job, label+": "+fmt.Sprintf(format, args...)))
	}
	if x == nil {
		add(CheckExclusiveNotRun, "", "the exclusive job was never submitted: none of the batch's jobs ran")
		return out
	}
	for _, j := range b.Jobs {
		if j.Name != x.Job && j.Outcome == Failed && !slices.Contains(x.Evicted, j.Name) {
			msg := j.Message
			if msg == "" {
				msg = "no message"
			}
			add(CheckJobFailed, j.Name, "job %s failed beside the exclusive job without being evicted: %s", j.Name, msg)
		}
	}
	switch {
	case x.Admitted.IsZero() || x.Started.IsZero():
		add(CheckExclusiveNotRun, x.Job, "the exclusive job %s (%s at %s) never started in %s", x.Job, x.Template, x.Priority, fmtDur(b.Until.Sub(x.Submitted)))
	case x.Outcome != Succeeded:
		add(CheckExclusiveNotRun, x.Job, "the exclusive job %s ended %s", x.Job, x.Outcome)
	}
	for _, rec := range x.Beside {
		add(CheckExclusiveBeside, x.Job, "%s while the exclusive job %s %s%s", rec.words(), x.Job, map[string]string{"Workload": "held its quota", "Pod": "ran"}[rec.Kind], x.predictedSuffix())
	}
	switch {
	case x.Predicted == admission.ExclusiveEvicts && len(x.Evicted) == 0 && len(x.RunningAtSubmit) > 0 && !x.Started.IsZero():
		add(CheckExclusiveModelled, x.Job, "the admission model says %s evicts running %s jobs at this priority, but Kueue evicted none of the %d running when it was submitted",
			x.Template, strings.Join(x.RunningAtSubmit, ", "), len(x.RunningAtSubmit))
	case x.Predicted == admission.ExclusiveWaits && len(x.Evicted) > 0:
		add(CheckExclusiveModelled, x.Job, "the admission model says %s waits for running jobs at this priority, but Kueue evicted %s", x.Template, strings.Join(x.Evicted, ", "))
	}
	return out
}

// predictedSuffix says when the model predicted what ran beside.
func (x *ExclusiveRun) predictedSuffix() string {
	if len(x.PredictedBeside) == 0 {
		return ""
	}
	return " (the admission model predicts it for this service state: " + strings.Join(x.PredictedBeside, ", ") + " can be admitted beside it)"
}

// words describes a record: "Workload experiments/pod-x held quota in
// gpu-general from 12:00:01 to 12:00:09".
func (rec Record) words() string {
	span := "from " + rec.From.UTC().Format("15:04:05")
	switch {
	case !rec.To.IsZero():
		span += " to " + rec.To.UTC().Format("15:04:05")
	case rec.Vanished:
		span += " until it vanished between two polls"
	default:
		span += " on"
	}
	if rec.Kind == "Workload" {
		return fmt.Sprintf("Workload %s/%s held quota in %s %s", rec.Namespace, rec.Name, rec.Queue, span)
	}
	return fmt.Sprintf("GPU pod %s/%s ran %s", rec.Namespace, rec.Name, span)
}

// Sentences say what the exclusive batch showed, for the text and
// markdown reports.
func (x *ExclusiveRun) Sentences() []string {
	var out []string
	s := fmt.Sprintf("Exclusive job %s (template %s at %s priority; the policy says jobs: %q) was submitted while %d of the batch's jobs ran.",
		x.Job, x.Template, x.Priority, x.Jobs, len(x.RunningAtSubmit))
	switch {
	case x.Started.IsZero():
		s += " It never started."
	default:
		if len(x.Evicted) > 0 {
			s += fmt.Sprintf(" Kueue evicted %d of them (%s);", len(x.Evicted), strings.Join(x.Evicted, ", "))
		} else {
			s += " Kueue evicted none;"
		}
		s += fmt.Sprintf(" it was admitted %s after submission and ran %s (%s).", fmtDur(x.Admitted.Sub(x.Submitted.Truncate(time.Second))),
			fmtDur(x.Ended.Sub(x.Started)), x.Outcome)
		if len(x.Rerun) > 0 {
			s += fmt.Sprintf(" Argo ran %d of the evicted steps again (a new pod), admitted once its quota was released.", len(x.Rerun))
		}
	}
	out = append(out, s)
	if !x.Started.IsZero() {
		if len(x.Beside) == 0 {
			out = append(out, fmt.Sprintf("Nothing else held quota in %s or ran a GPU pod in %s while it did: the card was its own, by the cluster's own Workload and pod stamps (%d Workloads and %d GPU pods recorded; %s resolution, spans that only touch within it not counted).",
				strings.Join(x.Queues, ", "), strings.Join(x.Namespaces, ", "), x.WorkloadsSeen, x.PodsSeen, fmtSecs(x.ResolutionSeconds)))
		} else {
			var ws []string
			for _, rec := range x.Beside {
				ws = append(ws, rec.words())
			}
			out = append(out, fmt.Sprintf("Ran beside it: %s.%s", strings.Join(ws, "; "), x.predictedSuffix()))
		}
	}
	if len(x.AlwaysOn) > 0 {
		out = append(out, fmt.Sprintf("The always-on services held their quota beside it, as the exclusive request leaves them: %s.", strings.Join(x.AlwaysOn, ", ")))
	}
	switch x.Predicted {
	case admission.ExclusiveEvicts:
		out = append(out, "The admission model predicts that it evicts the running batch jobs (gpupolicy explain, \"Exclusive templates\").")
	case admission.ExclusiveWaits:
		out = append(out, "The admission model predicts that it waits for the running batch jobs (gpupolicy explain, \"Exclusive templates\").")
	}
	return out
}
