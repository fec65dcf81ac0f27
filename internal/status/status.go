// Package status answers, from the live cluster, the question people on a
// shared GPU ask most: why is my job waiting, and until when. For each
// waiting GPU job it gives one verdict with its evidence — at an Argo lock
// (which Workflows hold the slots, and whether Kueue holds their pods: the
// lock-capacity pathology), in Kueue (the binding resource, who holds that
// quota, whether a preemption path applies at the job's priority), or on a
// node (unschedulable, and why) — and the earliest event that frees it: a
// running job's time limit, an on-demand service's idle scale-down at a
// clock time, or "indefinitely while requests keep arriving". The quota
// arithmetic and preemption are the admission model's (package admission)
// applied to the Workloads Kueue admitted; the prediction compared against
// is explain's for the service state read from the cluster.
//
// Read gets and lists the objects (Observed); Analyze is pure.
package status

import (
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/verify"
)

// Where a job waits (Verdict.Where).
const (
	AtLock  = "lock"
	InKueue = "kueue"
	OnNode  = "node"
)

// Verdict reasons (Verdict.Reason).
const (
	// ReasonLockCapacity: the job waits at a lock whose slots are held by
	// jobs whose pods Kueue holds (a lock larger than what the queue
	// admits).
	ReasonLockCapacity = "lock-capacity"
	// ReasonNextInLine: the ordinary wait for a turn. At a lock: its slots
	// are held by running jobs. In Kueue: the job's Workload waits only
	// for running jobs of its own ClusterQueue, within the queue's nominal
	// quota, to end (Kueue's "insufficient unused quota"): it is admitted
	// when the earliest of them (after the Workloads ahead of it) ends.
	ReasonNextInLine = "next-in-line"
	// ReasonQuota: Kueue holds the job's pod and the quota it needs is
	// held by something other than its queue's running jobs (a service,
	// a borrower, a Workload with no time limit): the binding resource
	// and its holders say who.
	ReasonQuota = "quota"
	// ReasonPreempting: Kueue admits the job by evicting others.
	ReasonPreempting = "preempting"
	// ReasonNeverFits: the job asks more than the queue can ever hold.
	ReasonNeverFits = "never-fits"
	// ReasonUnschedulable: Kueue admitted the job, the scheduler finds no
	// node for its pod.
	ReasonUnschedulable = "unschedulable"
)

// Until kinds (Until.Kind).
const (
	UntilTimeLimit  = "time-limit"
	UntilScaleDown  = "scale-down"
	UntilPreemption = "preemption"
	UntilNever      = "indefinitely"
	UntilUnknown    = "unknown"
)

// Report is what status finds. Its JSON form is a contract (README:
// status -o json).
type Report struct {
	Environment string    `json:"environment,omitempty"`
	Policy      string    `json:"policy"`
	Pin         string    `json:"pin,omitempty"`
	Now         time.Time `json:"now"`
	// State is the service state: "qwen2-5-7b up".
	State    string          `json:"state"`
	Services []ServiceStatus `json:"services"`
	Queues   []QueueUsage    `json:"queues"`
	Cards    []CardUsage     `json:"cards"`
	Locks    []LockUsage     `json:"locks"`
	// Running lists the GPU jobs whose pods run (or hold quota).
	Running []RunningJob `json:"running"`
	// Waiting holds one verdict per waiting GPU job, stuck ones first.
	Waiting []Verdict `json:"waiting"`
	// Predictions compare the cluster with explain's prediction, per
	// template × priority that has jobs.
	Predictions []Comparison `json:"predictions"`
	// Stuck counts the verdicts with Stuck set (exit status 1).
	Stuck int      `json:"stuck"`
	Notes []string `json:"notes"`
}

// ServiceStatus is one service's state.
type ServiceStatus struct {
	Name string `json:"name"`
	Mode string `json:"mode"`
	Up   bool   `json:"up"`
	// Since is when its Workload got quota; LastRequest its last request,
	// read where the policy's lastActivity says; ScaleDownAt when it
	// scales to zero if no request comes (on-demand, up).
	Since       *time.Time `json:"since,omitempty"`
	LastRequest *time.Time `json:"lastRequest,omitempty"`
	// LastRequestFrom says where LastRequest was read ("annotation
	// lab.internal/last-request (RFC 3339) on pod llm/qwen2-5-7b"), or
	// lastActivityUnknown when the policy does not say (on-demand only).
	LastRequestFrom string     `json:"lastRequestFrom,omitempty"`
	ScaleDownAt     *time.Time `json:"scaleDownAt,omitempty"`
	Evidence        string     `json:"evidence,omitempty"`
}

// Amount is one resource's use against its quota, as Kubernetes
// quantities.
type Amount struct {
	Resource string `json:"resource"`
	Used     string `json:"used"`
	Quota    string `json:"quota"`
	// Available is what the queue can still take (borrowable quota
	// included).
	Available string `json:"available,omitempty"`
}

// QueueUsage is one ClusterQueue's usage.
type QueueUsage struct {
	Queue   string   `json:"queue"`
	Card    string   `json:"card"`
	Cohort  string   `json:"cohort,omitempty"`
	Amounts []Amount `json:"amounts"`
	// Admitted counts the Workloads holding quota; Pending those waiting.
	Admitted int `json:"admitted"`
	Pending  int `json:"pending"`
}

// CardUsage is one card's usage by every queue against the card.
type CardUsage struct {
	Card    string   `json:"card"`
	Amounts []Amount `json:"amounts"`
}

// LockUsage is one lock's slots.
type LockUsage struct {
	Lock    string   `json:"lock"`
	Size    int64    `json:"size"`
	Held    int      `json:"held"`
	Holders []string `json:"holders"`
	Waiting int      `json:"waiting"`
}

// RunningJob is a GPU job that holds quota.
type RunningJob struct {
	Workflow string `json:"workflow"`
	Template string `json:"template"`
	Priority string `json:"priority"`
	// Started is when its pod started; Deadline when its time limit ends.
	Started  *time.Time `json:"started,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
	// Phase is the pod's phase ("Running", "Pending").
	Phase string `json:"phase"`
}

// Verdict is why one GPU job waits, and until when.
type Verdict struct {
	Workflow  string `json:"workflow"`
	Namespace string `json:"namespace"`
	Template  string `json:"template"`
	Priority  string `json:"priority"`
	// Where is lock, kueue or node; Reason one of the Reason constants.
	Where  string `json:"where"`
	Reason string `json:"reason"`
	// Summary says it in one line, in the lab's words.
	Summary string `json:"summary"`
	// Evidence lists what the verdict was read from.
	Evidence []string   `json:"evidence"`
	Lock     *LockWait  `json:"lock,omitempty"`
	Quota    *QuotaWait `json:"quota,omitempty"`
	Node     *NodeWait  `json:"node,omitempty"`
	Until    Until      `json:"until"`
	// Stuck is true when the job is starved (what frees it has no end
	// the policy bounds) or waits beyond what the policy predicts.
	Stuck bool `json:"stuck"`
	// WaitingSeconds is how long since the Workflow was created.
	WaitingSeconds int64 `json:"waitingSeconds"`
}

// LockWait is the evidence of a wait at an Argo lock.
type LockWait struct {
	Lock    string       `json:"lock"`
	Size    int64        `json:"size"`
	Holders []LockHolder `json:"holders"`
	// Position is the job's place among the lock's waiters (1: next).
	Position int `json:"position"`
	// HeldByKueue counts the holders whose pods Kueue holds.
	HeldByKueue int `json:"heldByKueue"`
	// KueueWould says what Kueue would do with the job if it got past the
	// lock: "admit", "preempt", "wait", "no-fit".
	KueueWould string `json:"kueueWould"`
}

// LockHolder is a Workflow holding a lock slot.
type LockHolder struct {
	Workflow string `json:"workflow"`
	// State is "running", "held by Kueue", "pending on a node", "starting".
	State string `json:"state"`
}

// QuotaWait is the evidence of a wait in Kueue.
type QuotaWait struct {
	Queue string `json:"queue"`
	Card  string `json:"card"`
	// Binding lists the resources the job does not fit in now.
	Binding []string `json:"binding"`
	// Request is the job's request; Available what the queue has left.
	Request   map[string]string `json:"request"`
	Available map[string]string `json:"available"`
	// Holders are the admitted Workloads that use the binding resources in
	// the job's cohort.
	Holders []QuotaHolder `json:"holders"`
	// KueueMessage is Kueue's own message on the Workload.
	KueueMessage string `json:"kueueMessage,omitempty"`
	// Preemption says whether a preemption path applies at the job's
	// priority, and which.
	Preemption string `json:"preemption"`
	// Ahead counts the pending Workloads Kueue orders before it in its
	// ClusterQueue (higher priority, or equal and older).
	Ahead int `json:"ahead"`
}

// QuotaHolder is an admitted Workload using a binding resource.
type QuotaHolder struct {
	// Name is the service's name or "Workflow NAME".
	Name     string            `json:"name"`
	Service  string            `json:"service,omitempty"`
	Workflow string            `json:"workflow,omitempty"`
	Queue    string            `json:"queue"`
	Priority string            `json:"priority"`
	Uses     map[string]string `json:"uses"`
	// Borrowing is true when its queue uses more than its nominal quota.
	Borrowing bool `json:"borrowing"`
}

// NodeWait is the evidence of a pod the scheduler cannot place.
type NodeWait struct {
	Message string   `json:"message"`
	Events  []string `json:"events"`
	// Outside lists pods outside Kueue that take the card's shares.
	Outside []string `json:"outside"`
}

// Until is the earliest event that frees the job.
type Until struct {
	Kind string     `json:"kind"`
	At   *time.Time `json:"at,omitempty"`
	// WhileRequestsArrive: each request to the service pushes At later, so
	// steady requests hold the job off indefinitely.
	WhileRequestsArrive bool `json:"whileRequestsArrive"`
	// By names what ends at At: "Workflow line-1" (a running job's time
	// limit) or a service ("qwen2-5-7b", its scale-down).
	By    string `json:"by,omitempty"`
	Words string `json:"words"`
}

// Comparison is the cluster now against explain's prediction for one
// template × priority in the current service state.
type Comparison struct {
	Template  string `json:"template"`
	Priority  string `json:"priority"`
	Running   int    `json:"running"`
	Predicted int    `json:"predicted"`
	Waiting   int    `json:"waiting"`
	// Agrees is false when jobs wait while fewer run than predicted.
	Agrees bool   `json:"agrees"`
	Words  string `json:"words"`
}

// Input is what Analyze reads besides the observed objects.
type Input struct {
	Policy      *policy.Policy
	Environment string
	Pin         string
	// Predict is explain's prediction (verify.AdmissionPredictor); nil
	// leaves Predictions empty.
	Predict verify.Predictor
}

// job is one GPU step Workflow as observed.
type job struct {
	wf       *wfv1.Workflow
	variant  policy.Variant
	priority string
	pod      *corev1.Pod
	wl       *kueue.Workload
	// state: running (holds quota, pod not unschedulable), kueue, node,
	// lock, starting, done.
	state    string
	waitLock string // the lock it waits at
	holds    []string
	deadline *time.Time
	started  *time.Time
	verdict  *Verdict
}

// holder is an admitted Workload in the model, with what frees it.
type holder struct {
	w       *admission.Workload
	wl      *kueue.Workload
	service string
	job     *job
	end     *time.Time
	endKind string
	endWhat string
	// endBy names it in Until.By.
	endBy string
}
