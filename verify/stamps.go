package verify

import (
	"time"

	"github.com/gpupolicy/gpupolicy/verify/testjob"
)

// Outcome is how a job ended, as verify saw it.
type Outcome string

const (
	// Succeeded: the Workflow succeeded (and, where its log was readable,
	// the test job's own checks passed).
	Succeeded Outcome = "succeeded"
	// Failed: the Workflow failed without verify stopping it.
	Failed Outcome = "failed"
	// Cancelled: verify stopped it (spec.shutdown).
	Cancelled Outcome = "cancelled"
	// Waiting: it never started before verify stopped watching.
	Waiting Outcome = "waiting"
	// Unfinished: it started but had not ended when verify stopped watching.
	Unfinished Outcome = "unfinished"
)

// Job is one test job (one Workflow, one pod) as verify observed it. Every
// stamp comes from the API server (one-second resolution) except Submitted
// and the job's own stamps (JobStart, WorkEnded), which are sub-second; a
// zero time means "not seen".
type Job struct {
	// Name is the Workflow's name; Pod and Workload the objects it made.
	Name     string `json:"name"`
	Pod      string `json:"pod,omitempty"`
	Workload string `json:"workload,omitempty"`
	// Index is the job's place in its batch, from 1.
	Index int `json:"index"`

	// Submitted is when verify created the Workflow.
	Submitted time.Time `json:"submitted"`
	// StepStarted is when Argo started the job's step: verify's first
	// sighting (at its poll's resolution) of the step's node no longer
	// waiting for its lock, else the pod's creation.
	StepStarted time.Time `json:"stepStarted,omitzero"`
	// PodCreated is when the step's pod appeared: Argo had given it the
	// lock.
	PodCreated time.Time `json:"podCreated,omitzero"`
	// Admitted is when Kueue reserved quota for the pod's Workload
	// (QuotaReserved, else Admitted).
	Admitted time.Time `json:"admitted,omitzero"`
	// ContainerStarted is when the main container started running.
	ContainerStarted time.Time `json:"containerStarted,omitzero"`
	// JobStart and WorkEnded are the test job's own stamps from its JSON
	// line, when its log could be read.
	JobStart  time.Time `json:"jobStart,omitzero"`
	WorkEnded time.Time `json:"workEnded,omitzero"`
	// Ended is when the main container stopped (or the pod disappeared).
	Ended time.Time `json:"ended,omitzero"`
	// Released is when Kueue finished the Workload (its quota freed).
	Released time.Time `json:"released,omitzero"`

	Outcome Outcome `json:"outcome"`
	// ExitCode is the main container's exit code, when it ended.
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Fault is the fault the job was made to carry in a fault batch
	// (FaultCrash, FaultOverAllocate); empty for an ordinary job.
	Fault string `json:"fault,omitempty"`
	// Message is Argo's or Kueue's last word on the job, e.g. "Waiting
	// for experiments/ConfigMap/gpu-semaphores/main lock. Lock status: 0/4".
	Message string `json:"message,omitempty"`
	// Result is the test job's JSON line, when its log could be read.
	Result *testjob.Result `json:"result,omitempty"`
}

// Started is when the job started: its own start stamp when known, else its
// container's start.
func (j Job) Started() time.Time {
	if !j.JobStart.IsZero() {
		return j.JobStart
	}
	return j.ContainerStarted
}

// StartSource says where Started comes from: "job" or "container" ("" when
// it never started).
func (j Job) StartSource() string {
	switch {
	case !j.JobStart.IsZero():
		return "job"
	case !j.ContainerStarted.IsZero():
		return "container"
	}
	return ""
}

// Cancel is the one cancellation of a --cancel run.
type Cancel struct {
	// Job is the Workflow verify stopped.
	Job string `json:"job"`
	// Strategy is the spec.shutdown value verify set ("Terminate").
	Strategy string `json:"strategy"`
	// Requested is when verify patched the Workflow.
	Requested time.Time `json:"requested"`
	// LockReleased is when Argo let go of the cancelled Workflow's lock:
	// its finishedAt, else verify's first sighting of it final and holding
	// none. Argo releases it when it marks the Workflow failed, which can
	// be before the pod has stopped.
	LockReleased time.Time `json:"lockReleased,omitzero"`
	// Closed is when the job's container stopped (or its pod disappeared).
	Closed time.Time `json:"closed,omitzero"`
	// ClosedBy is "argo" when Argo's termination ended the pod, or "pod
	// deletion" when verify had to delete the pod after the grace period
	// (a simulated node cannot be signalled).
	ClosedBy string `json:"closedBy,omitempty"`
	// Next is the job that took the freed place, and when it started.
	Next        string    `json:"next,omitempty"`
	NextStarted time.Time `json:"nextStarted,omitzero"`
}

// BatchKind tells a level's batch from the cancel batch.
type BatchKind string

const (
	LevelBatch  BatchKind = "level"
	CancelBatch BatchKind = "cancel"
	FaultBatch  BatchKind = "faults"
)

// Batch is n jobs submitted together.
type Batch struct {
	Kind BatchKind `json:"kind"`
	// Level is how many jobs were submitted together.
	Level int `json:"level"`
	// Index is the batch's number within its level, from 1.
	Index int `json:"index"`
	// Submitted is when verify started submitting the batch.
	Submitted time.Time `json:"submitted"`
	// Until is when verify stopped watching it.
	Until time.Time `json:"until"`
	// State is the service state read before the batch, and StateAfter
	// the one read after it; they differ when a service woke or slept
	// during the batch, and the batch is then not compared.
	State      State  `json:"state"`
	StateAfter *State `json:"stateAfter,omitempty"`
	// Predicted is admission's count for State.
	Predicted Prediction `json:"predicted"`
	// StarveWatchSeconds is set when the prediction was zero and verify
	// watched the jobs wait this long instead of waiting for them to end.
	StarveWatchSeconds float64 `json:"starveWatchSeconds,omitempty"`
	Jobs               []Job   `json:"jobs"`
	Cancel             *Cancel `json:"cancel,omitempty"`
	Fault              *Fault  `json:"fault,omitempty"`
	// Exclusive is the exclusive batch's job and what ran beside it.
	Exclusive *ExclusiveRun `json:"exclusive,omitempty"`
}

// Label is "level 4, batch 2", "cancel batch (5 jobs)" or "fault batch
// (5 jobs)".
func (b Batch) Label() string {
	switch b.Kind {
	case CancelBatch:
		return "cancel batch (" + itoa(b.Level) + " jobs)"
	case FaultBatch:
		return "fault batch (" + itoa(b.Level) + " jobs)"
	case ExclusiveBatch:
		return "exclusive batch (" + itoa(b.Level) + " jobs)"
	}
	return "level " + itoa(b.Level) + ", batch " + itoa(b.Index)
}
