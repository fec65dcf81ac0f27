package verify

import (
	"slices"
	"time"
)

// The hand-off, by part (the first write-up's figure 3): the gap between one
// job's end and the start of the job that took its place, split at the
// stamps verify observes for the next job.
//
//   - lock: from the previous job's end to the next step's start, when
//     Argo's node for the waiting step stopped waiting for its lock
//     (Job.StepStarted) — Argo releasing the semaphore and starting the
//     waiting workflow's step;
//   - pod: from the step's start to its pod's creation;
//   - admission: from the pod's creation to Kueue's QuotaReserved
//     (Admitted);
//   - container: from admission to the main container's start (scheduling,
//     image and container start);
//   - startup: from the container's start to the job's own start stamp
//     (Python, PyTorch, CUDA); unknown when the job's log was not readable.
//
// Pod and queue stamps come from the API server at one-second resolution
// (HandoffResolutionSeconds) and the step's start from verify's own poll, so
// a part can read a second short or long; every boundary is clamped between
// the gap's ends and after the previous one, so the parts always add up to
// the gap and the first part carries the others' rounding, as in the
// write-up.
const (
	PartLock      = "lock"
	PartPod       = "pod"
	PartAdmission = "admission"
	PartContainer = "container"
	PartStartup   = "startup"
)

// HandoffResolutionSeconds is the resolution of the API server's stamps
// (creationTimestamp, condition transitions, container state times).
const HandoffResolutionSeconds = 1.0

// HandoffPart names one part of a hand-off.
type HandoffPart struct {
	ID    string
	Label string
	// Colour fills the part in the stacked bar.
	Colour string
}

// HandoffParts are the parts in order, from the previous job's end.
var HandoffParts = []HandoffPart{
	{PartLock, "Argo releases the lock and starts the next step", "#8e6bb8"},
	{PartPod, "pod creation", "#d98c3f"},
	{PartAdmission, "Kueue admission", "#3f9d6b"},
	{PartContainer, "scheduling and container start", "#2f6fb0"},
	{PartStartup, "the job's own start-up", "#b94a5a"},
}

// GapPart is one part of one hand-off; Seconds is nil when unknown.
type GapPart struct {
	Part    string   `json:"part"`
	Seconds *float64 `json:"seconds"`
}

// PartSummary is one part over a level's hand-offs: the median and range of
// the known values, and how many hand-offs had it unknown.
type PartSummary struct {
	Part          string   `json:"part"`
	Label         string   `json:"label"`
	MedianSeconds *float64 `json:"medianSeconds,omitempty"`
	MinSeconds    *float64 `json:"minSeconds,omitempty"`
	MaxSeconds    *float64 `json:"maxSeconds,omitempty"`
	// Known and Unknown count the hand-offs with and without the part.
	Known   int `json:"known"`
	Unknown int `json:"unknown,omitempty"`
}

// gapParts splits the hand-off from end (the previous job's end) to next's
// start into HandoffParts.
func gapParts(end time.Time, next Job) []GapPart {
	stop := next.Started()
	// Boundaries after end, in order; a missing stamp takes the next known
	// one (its part is then 0), the last is the gap's end.
	bounds := []time.Time{next.StepStarted, next.PodCreated, next.Admitted, next.ContainerStarted, next.JobStart}
	unknownStartup := next.JobStart.IsZero()
	if unknownStartup {
		bounds[4] = stop
	}
	for i := len(bounds) - 2; i >= 0; i-- {
		if bounds[i].IsZero() {
			bounds[i] = bounds[i+1]
		}
	}
	out := make([]GapPart, len(HandoffParts))
	cur := end
	for i, t := range bounds {
		if t.Before(cur) {
			t = cur
		}
		if t.After(stop) {
			t = stop
		}
		out[i] = GapPart{Part: HandoffParts[i].ID, Seconds: ptr(secs(t.Sub(cur)))}
		cur = t
	}
	if unknownStartup {
		out[4].Seconds = nil
	}
	return out
}

// summarizeParts gives each part's median and range over the gaps.
func summarizeParts(gaps []Gap) []PartSummary {
	if len(gaps) == 0 {
		return nil
	}
	out := make([]PartSummary, len(HandoffParts))
	for i, p := range HandoffParts {
		ps := PartSummary{Part: p.ID, Label: p.Label}
		var xs []float64
		for _, g := range gaps {
			if i >= len(g.Parts) || g.Parts[i].Seconds == nil {
				ps.Unknown++
				continue
			}
			xs = append(xs, *g.Parts[i].Seconds)
		}
		ps.Known = len(xs)
		if m, ok := Median(xs); ok {
			ps.MedianSeconds = ptr(m)
			ps.MinSeconds = ptr(slices.Min(xs))
			ps.MaxSeconds = ptr(slices.Max(xs))
		}
		out[i] = ps
	}
	return out
}
