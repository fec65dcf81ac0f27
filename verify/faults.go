package verify

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/finding"
)

// Faults beside others (Options.Faults, `verify --faults`): the write-up's
// open risk, "a job that crashes or runs out of GPU memory beside others".
//
// The fault batch has (predicted + 1) jobs. The first is made to crash:
// the test job's --crash-after (an uncaught exception, exit
// testjob.CrashExitCode) CrashAfter after its checks; on a simulated node,
// which runs no script, the pod carries the same run time and exit code
// as annotations (AnnotationRunSeconds, AnnotationExitCode) and the node
// ends its main container with that code as a kubelet would. It is
// submitted alone and the others once it runs, so that it is the first
// admitted and its place is the one the extra job takes. Where an earlier
// job of the run reported a CUDA device, the second job allocates
// 2 × its declaration on the card beyond what it declares (--allocate-mib);
// time-slicing isolates no memory and a declaration is accounting only, so
// nothing stops it. Where none did, that part is skipped and the report
// says why.
//
// The report (FaultSummary) says whether the others finished with correct
// outputs (their own checks, when their logs are readable), when Kueue
// freed the crashed job's quota (its Workload's Finished) and Argo its lock
// slot (where the template takes a lock), and how long the job that took
// its place waited.

// The faults a fault batch's jobs carry (Job.Fault).
const (
	FaultCrash        = "crash"
	FaultOverAllocate = "over-allocation"
)

// Fault is a fault batch's set-up and what only the run can see of it.
type Fault struct {
	// Crash is the Workflow made to crash CrashAfterSeconds after its
	// checks, with exit code ExitCode.
	Crash             string  `json:"crash"`
	CrashAfterSeconds float64 `json:"crashAfterSeconds"`
	ExitCode          int     `json:"exitCode"`
	// LockReleased is when Argo let go of the crashed Workflow's lock (its
	// finishedAt, else verify's first sighting of it final and holding
	// none); zero where the template takes no lock.
	LockReleased time.Time `json:"lockReleased,omitzero"`
	// OverAllocate is the Workflow made to allocate AllocateMiB on the card
	// beyond its declaration of DeclaredMiB; empty when that was skipped,
	// and OverAllocateSkipped says why.
	OverAllocate        string `json:"overAllocate,omitempty"`
	AllocateMiB         int64  `json:"allocateMiB,omitempty"`
	DeclaredMiB         int64  `json:"declaredMiB,omitempty"`
	OverAllocateSkipped string `json:"overAllocateSkipped,omitempty"`
	// LogsUnreadable says why the jobs' logs (their own outputs) could not
	// be read, when they could not.
	LogsUnreadable string `json:"logsUnreadable,omitempty"`
}

// DefaultCrashAfter is how long after its checks the crashing job crashes:
// half the hold, 3 to 30 s, so that the others have started beside it and
// the extra job still waits for a place.
func DefaultCrashAfter(hold time.Duration) time.Duration {
	return min(max(hold/2, 3*time.Second), 30*time.Second)
}

// FaultSummary is what the fault batch showed.
type FaultSummary struct {
	Fault
	Batch string `json:"batch"`
	// Crashed: the crashing job's main container ended with a non-zero
	// exit code (CrashExitCode), after RanSeconds; CrashMessage is Argo's
	// word on the step.
	Crashed       bool     `json:"crashed"`
	CrashExitCode *int32   `json:"crashExitCode,omitempty"`
	CrashMessage  string   `json:"crashMessage,omitempty"`
	RanSeconds    *float64 `json:"ranSeconds,omitempty"`
	// Beside are the jobs running when it crashed.
	Beside []string `json:"beside"`
	// QuotaReleasedSeconds is from the crash (its container's end) to
	// Kueue's Finished on its Workload (quota freed); LockReleasedSeconds
	// from the crash to Argo's release of its lock slot (Lock names it;
	// both empty where the template takes no lock). Negative never: API
	// stamps are whole seconds and a release is read as no earlier than
	// the crash.
	QuotaReleasedSeconds *float64 `json:"quotaReleasedSeconds,omitempty"`
	Lock                 string   `json:"lock,omitempty"`
	LockReleasedSeconds  *float64 `json:"lockReleasedSeconds,omitempty"`
	// Next is the job that took the crashed job's place: NextGap its
	// hand-off from the crash to its start, by part; NextWaitedSeconds
	// from its submission to its start.
	Next              string   `json:"next,omitempty"`
	NextGap           *Gap     `json:"nextGap,omitempty"`
	NextWaitedSeconds *float64 `json:"nextWaitedSeconds,omitempty"`
	// Others counts the batch's jobs without a fault; OthersSucceeded
	// those that succeeded, OutputsChecked those whose own output (the
	// test job's JSON line) was read and passed its checks, OutputsBad
	// those whose output failed them. OutputsNote says why outputs were
	// not read (a simulated node serves no logs).
	Others          int    `json:"others"`
	OthersSucceeded int    `json:"othersSucceeded"`
	OutputsChecked  int    `json:"outputsChecked"`
	OutputsBad      int    `json:"outputsBad,omitempty"`
	OutputsNote     string `json:"outputsNote,omitempty"`
	// OverAllocation is the over-allocating job's outcome and what it
	// allocated (from its output), when it ran.
	OverAllocation *OverAllocation `json:"overAllocation,omitempty"`
}

// OverAllocation is what the job that allocated beyond its declaration
// did.
type OverAllocation struct {
	Outcome Outcome `json:"outcome"`
	// AllocatedMiB is the extra memory it allocated, PeakMiB PyTorch's peak
	// on the card, Error the allocation's failure (out of memory).
	AllocatedMiB float64 `json:"allocatedMiB,omitempty"`
	PeakMiB      float64 `json:"peakMiB,omitempty"`
	Error        string  `json:"error,omitempty"`
	Note         string  `json:"note,omitempty"`
}

// summarizeFault builds a fault batch's summary from its stamps.
func summarizeFault(b Batch) *FaultSummary {
	f := b.Fault
	fs := &FaultSummary{Fault: *f, Batch: b.Label(), Lock: b.Predicted.Lock, Beside: []string{}}
	lock := fs.Lock
	ci := slices.IndexFunc(b.Jobs, func(j Job) bool { return j.Name == f.Crash })
	for _, j := range b.Jobs {
		switch j.Fault {
		case FaultCrash:
			continue
		case FaultOverAllocate:
			oa := &OverAllocation{Outcome: j.Outcome}
			if r := j.Result; r != nil {
				oa.AllocatedMiB, oa.PeakMiB, oa.Error, oa.Note = r.AllocatedExtraMiB, r.GPUMemAllocatedMiB, r.AllocError, r.AllocNote
			}
			fs.OverAllocation = oa
			continue
		}
		fs.Others++
		if j.Outcome == Succeeded {
			fs.OthersSucceeded++
		}
		if j.Result != nil {
			if j.Result.Check() == nil {
				fs.OutputsChecked++
			} else {
				fs.OutputsBad++
			}
		}
	}
	if fs.OutputsChecked+fs.OutputsBad < fs.Others {
		fs.OutputsNote = "not every job's output was readable"
		if f.LogsUnreadable != "" {
			fs.OutputsNote = f.LogsUnreadable
		}
	}
	if ci < 0 {
		return fs
	}
	c := b.Jobs[ci]
	fs.CrashExitCode, fs.CrashMessage = c.ExitCode, c.Message
	fs.Crashed = c.ExitCode != nil && *c.ExitCode != 0
	if c.Started().IsZero() || c.Ended.IsZero() {
		return fs
	}
	fs.RanSeconds = ptr(secs(max(0, c.Ended.Sub(c.ContainerStarted))))
	crash := newSpan(ci, c.Started(), c.Ended)
	for _, s := range runningSpans(b) {
		if s.job != ci && s.start.Before(crash.end) && s.end.After(crash.start) {
			fs.Beside = append(fs.Beside, b.Jobs[s.job].Name)
		}
	}
	end := c.Ended
	if !c.Released.IsZero() {
		fs.QuotaReleasedSeconds = ptr(secs(max(0, c.Released.Sub(end))))
	}
	if lock != "" && !f.LockReleased.IsZero() {
		fs.LockReleasedSeconds = ptr(secs(max(0, f.LockReleased.Sub(end))))
	}
	// The next: the first job to start at or after the crash among those
	// not running before it.
	var next *Job
	for i := range b.Jobs {
		j := &b.Jobs[i]
		s := j.Started()
		if i == ci || s.IsZero() || s.Truncate(time.Second).Before(end.Truncate(time.Second)) {
			continue
		}
		if next == nil || s.Before(next.Started()) {
			next = j
		}
	}
	if next != nil {
		fs.Next = next.Name
		fs.NextGap = &Gap{Batch: b.Label(), Job: next.Name, After: c.Name, Seconds: secs(max(0, next.Started().Sub(end))), Parts: gapParts(end, *next)}
		fs.NextWaitedSeconds = ptr(secs(max(0, next.Started().Sub(next.Submitted))))
	}
	return fs
}

// faultFindings are the fault batch's own disagreements: the crash not
// happening, and its quota or lock slot not freed.
func faultFindings(b Batch) []finding.Finding {
	f := b.Fault
	if f == nil {
		return nil
	}
	ci := slices.IndexFunc(b.Jobs, func(j Job) bool { return j.Name == f.Crash })
	if ci < 0 {
		return nil
	}
	c := b.Jobs[ci]
	label := b.Label()
	var out []finding.Finding
	switch {
	case c.Started().IsZero():
		out = append(out, newFinding(CheckFaultNotInjected, c.Name, fmt.Sprintf("%s: job %s, made to crash, never started, so nothing crashed beside the others", label, c.Name)))
		return out
	case c.Ended.IsZero():
		out = append(out, newFinding(CheckFaultNotInjected, c.Name, fmt.Sprintf("%s: job %s, made to crash %s after its checks, was still running when verify stopped watching", label, c.Name, fmtSecs(f.CrashAfterSeconds))))
		return out
	case c.ExitCode == nil || *c.ExitCode == 0:
		code := "no exit code"
		if c.ExitCode != nil {
			code = fmt.Sprintf("exit code %d", *c.ExitCode)
		}
		out = append(out, newFinding(CheckFaultNotInjected, c.Name, fmt.Sprintf("%s: job %s, made to crash with exit code %d, ended with %s (%s)", label, c.Name, f.ExitCode, code, c.Outcome)))
		return out
	}
	var held []string
	if c.Released.IsZero() {
		held = append(held, "its quota (its Workload "+c.Workload+" never became Finished)")
	}
	if b.Predicted.Lock != "" && f.LockReleased.IsZero() {
		held = append(held, "its slot of lock "+b.Predicted.Lock)
	}
	if len(held) > 0 {
		out = append(out, newFinding(CheckFaultNotReleased, c.Name, fmt.Sprintf("%s: job %s crashed (exit code %d) but still held %s %s after the crash, when verify stopped watching",
			label, c.Name, *c.ExitCode, strings.Join(held, " and "), fmtDur(max(0, b.Until.Sub(c.Ended))))))
	}
	return out
}

// faultSentences say what the fault batch showed, in the lab's words.
func faultSentences(f *FaultSummary) []string {
	var out []string
	crash := fmt.Sprintf("%s: job %s was made to crash %s after its checks (exit code %d)", f.Batch, f.Crash, fmtSecs(f.CrashAfterSeconds), f.ExitCode)
	switch {
	case !f.Crashed:
		crash += ", but it did not crash"
	default:
		crash += fmt.Sprintf(": it ended with exit code %d", *f.CrashExitCode)
		if f.RanSeconds != nil {
			crash += fmt.Sprintf(" after running %s", fmtSecs(*f.RanSeconds))
		}
		if f.CrashMessage != "" {
			crash += fmt.Sprintf(" (Argo: %q)", f.CrashMessage)
		}
		if len(f.Beside) > 0 {
			crash += fmt.Sprintf(", with %d other job(s) running beside it (%s)", len(f.Beside), strings.Join(f.Beside, ", "))
		} else {
			crash += ", with no other job running beside it"
		}
	}
	out = append(out, crash+".")
	others := fmt.Sprintf("The others: %d of %d succeeded", f.OthersSucceeded, f.Others)
	switch {
	case f.OutputsChecked == f.Others && f.Others > 0:
		others += fmt.Sprintf("; every output was read and passed its checks")
	case f.OutputsChecked+f.OutputsBad > 0:
		others += fmt.Sprintf("; %d output(s) read passed their checks, %d failed them", f.OutputsChecked, f.OutputsBad)
		if f.OutputsNote != "" {
			others += "; the rest unread: " + f.OutputsNote
		}
	default:
		others += "; their outputs were not read"
		if f.OutputsNote != "" {
			others += " (" + f.OutputsNote + ")"
		}
		others += ", so \"succeeded\" is their Workflows' word"
	}
	out = append(out, others+".")
	if f.Crashed {
		rel := "Released: "
		if f.QuotaReleasedSeconds != nil {
			rel += fmt.Sprintf("Kueue freed its quota %s after the crash (its Workload Finished)", fmtSecs(*f.QuotaReleasedSeconds))
		} else {
			rel += "Kueue had not freed its quota when verify stopped watching"
		}
		switch {
		case f.Lock == "":
			rel += "; the template takes no lock, so nothing else held its place"
		case f.LockReleasedSeconds != nil:
			rel += fmt.Sprintf("; Argo released its slot of lock %s %s after the crash, when it marked the step failed", f.Lock, fmtSecs(*f.LockReleasedSeconds))
		default:
			rel += fmt.Sprintf("; Argo had not released its slot of lock %s when verify stopped watching", f.Lock)
		}
		if f.Next != "" && f.NextGap != nil {
			rel += fmt.Sprintf(". %s took its place %s after the crash, having waited %s since its submission", f.Next, fmtSecs(f.NextGap.Seconds), fmtSecs(*f.NextWaitedSeconds))
			var parts []string
			for i, p := range f.NextGap.Parts {
				if p.Seconds != nil && *p.Seconds > 0 {
					parts = append(parts, fmt.Sprintf("%s %s", HandoffParts[i].Label, fmtSecs(*p.Seconds)))
				}
			}
			if len(parts) > 0 {
				rel += " (" + strings.Join(parts, ", ") + ")"
			}
		} else {
			rel += ". No job took its place"
		}
		out = append(out, rel+".")
	}
	switch {
	case f.OverAllocateSkipped != "":
		out = append(out, "GPU over-allocation not run: "+f.OverAllocateSkipped+".")
	case f.OverAllocation != nil:
		oa := f.OverAllocation
		s := fmt.Sprintf("Job %s was made to allocate %d MiB on the card beyond its declaration of %d MiB", f.OverAllocate, f.AllocateMiB, f.DeclaredMiB)
		switch {
		case oa.Error != "":
			s += fmt.Sprintf(": the allocation failed (%s)", oa.Error)
		case oa.AllocatedMiB > 0:
			s += fmt.Sprintf(": it did (PyTorch's peak %.0f MiB) and nothing stopped it, since a declaration is accounting only", oa.PeakMiB)
		case oa.Note != "":
			s += ": " + oa.Note
		default:
			s += ": its output was not read"
		}
		out = append(out, s+fmt.Sprintf("; it %s.", oa.Outcome))
	}
	return out
}
