package verify

import (
	"fmt"
	"slices"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/finding"
)

// A finding (internal/finding) is one disagreement between what the
// cluster did and what the policy predicts, or a job that went wrong. Every
// verify rule is an error: any finding fails the run (exit 1). Its Object is
// the test job's Workflow (Workflow/NAME, in the report's namespace) when
// one job is named; its message starts with the batch's label.

// Finding IDs: the rules verify registers (Checks).
const (
	CheckMoreAtOnce      = "more-at-once"
	CheckDidNotWait      = "did-not-wait"
	CheckFewerAtOnce     = "fewer-at-once"
	CheckStarvedAdmitted = "admitted-while-starved"
	CheckJobFailed       = "job-failed"
	CheckJobCheck        = "job-check-failed"
	CheckUnfinished      = "unfinished"
	CheckCancel          = "cancel-not-closed"
	CheckCleanup         = "left-behind"
	CheckCancelOverlap   = "started-beside-cancelled"
	// The fault batch's (faults.go).
	CheckFaultNotInjected = "fault-not-injected"
	CheckFaultNotReleased = "fault-not-released"
)

func verifyRule(id, reason string) finding.Rule {
	return finding.Register(finding.Rule{ID: id, Verb: finding.Verify, Severity: finding.Error, Reason: reason})
}

// Checks lists every rule verify applies.
var Checks = []finding.Rule{
	verifyRule(CheckMoreAtOnce, "more jobs ran (or held quota) at once than the policy admits in this service state"),
	verifyRule(CheckDidNotWait, "a job beyond the predicted count started while that many others were running, instead of waiting for one to end"),
	verifyRule(CheckFewerAtOnce, "fewer jobs ran at once than the policy admits, though enough were submitted together"),
	verifyRule(CheckStarvedAdmitted, "the policy admits no job of this priority in this service state, yet one was admitted"),
	verifyRule(CheckJobFailed, "a test job failed without being cancelled"),
	verifyRule(CheckJobCheck, "the test job's own check failed: a GPU result over its error bound"),
	verifyRule(CheckUnfinished, "a job the policy admits did not start or finish before the timeout"),
	verifyRule(CheckCancel, "a cancelled job did not stop"),
	verifyRule(CheckCleanup, "verify could not delete everything it created"),
	verifyRule(CheckCancelOverlap, "a job started while a cancelled one still ran: Argo released the lock when it marked the terminated workflow failed, before its pod stopped, so the lock alone does not keep a cancelled job's place"),
	verifyRule(CheckFaultNotInjected, "the job verify made crash did not end with a non-zero exit code, so the fault batch tested nothing"),
	verifyRule(CheckFaultNotReleased, "a crashed job's quota (its Workload not Finished) or lock slot was still held when verify stopped watching"),
}

// newFinding is a finding of the verify rule id (an error).
func newFinding(id, job, message string) finding.Finding {
	f := finding.Finding{Rule: id, Severity: finding.Error, Message: message}
	if job != "" {
		f.Object = "Workflow/" + job
	}
	return f
}

// Compare checks one batch against its prediction: never more at once than
// predicted, every job beyond the count waits for one to end, as many at
// once as predicted when enough were submitted, and no admission at all
// when the prediction is zero. It also reports failed and unfinished jobs
// (in a fault batch, the jobs without a fault; and that the fault
// happened and its quota and lock slot were freed).
// A batch during which the service state changed is only checked for job
// failures.
func Compare(b Batch) []finding.Finding {
	if b.Kind == ExclusiveBatch {
		// Its jobs run through two templates at two priorities, and the
		// exclusive one may evict the others: exclusiveFindings.
		return exclusiveFindings(b)
	}
	var out []finding.Finding
	label := b.Label()
	add := func(id, job, format string, args ...any) {
		out = append(out, newFinding(id, job, label+": "+fmt.Sprintf(format, args...)))
	}
	beside := ""
	if b.Fault != nil {
		beside = " beside the job made to crash (" + b.Fault.Crash + ")"
	}
	for _, j := range b.Jobs {
		switch {
		case j.Fault != "":
			// The fault batch's own jobs fail on purpose; faultFindings
			// checks that they did.
		case j.Outcome == Failed:
			msg := j.Message
			if msg == "" {
				msg = "no message"
			}
			add(CheckJobFailed, j.Name, "job %s failed%s: %s", j.Name, beside, msg)
		case j.Result != nil && j.Result.Check() != nil:
			add(CheckJobCheck, j.Name, "job %s%s: %v", j.Name, beside, j.Result.Check())
		}
	}
	out = append(out, faultFindings(b)...)
	if b.Cancel != nil && b.Cancel.Closed.IsZero() {
		add(CheckCancel, b.Cancel.Job, "job %s was cancelled (spec.shutdown=%s) at %s but its pod had not stopped when verify stopped watching",
			b.Cancel.Job, b.Cancel.Strategy, b.Cancel.Requested.Format("15:04:05"))
	}
	if b.StateAfter != nil && !b.State.Same(*b.StateAfter) {
		return out
	}
	p := b.Predicted
	state := b.State.Label()
	if b.Cancel != nil {
		var more []finding.Finding
		more, b = cancelOverlap(b)
		out = append(out, more...)
	}
	if p.Admitted <= 0 {
		for _, j := range b.Jobs {
			if !j.Admitted.IsZero() || !j.Started().IsZero() {
				at := j.Admitted
				if at.IsZero() {
					at = j.Started()
				}
				add(CheckStarvedAdmitted, j.Name, "job %s was admitted %s after submission with %s, where the policy admits no %s job (%s)",
					j.Name, fmtDur(at.Sub(j.Submitted)), state, p.Priority, p.Why())
			}
		}
		return out
	}

	run := runningSpans(b)
	if m := maxOverlap(run); m > p.Admitted {
		add(CheckMoreAtOnce, "", "%d ran at once with %s, predicted at most %d (%s)", m, state, p.Admitted, p.Why())
	}
	if m := MaxAdmitted(b); m > p.Admitted {
		add(CheckMoreAtOnce, "", "%d held quota at once with %s, predicted at most %d (%s)", m, state, p.Admitted, p.Why())
	}
	for r, s := range run {
		others := 0
		for _, o := range run[:r] {
			if o.end.After(s.start) {
				others++
			}
		}
		if others >= p.Admitted {
			j := b.Jobs[s.job]
			add(CheckDidNotWait, j.Name, "job %s (%d of %d submitted together) started %s after submission while %d others were running; with %s only %d run at once (%s), so it should have waited for one to end",
				j.Name, j.Index, len(b.Jobs), fmtDur(j.Started().Sub(b.Submitted)), others, state, p.Admitted, p.Why())
		}
	}
	want := min(len(b.Jobs), p.Admitted)
	if b.Cancel == nil {
		if m := maxOverlap(run); m < want && allEnded(b) {
			add(CheckFewerAtOnce, "", "at most %d of %d ran at once with %s, predicted %d (%s)", m, len(b.Jobs), state, want, p.Why())
		}
	}
	for _, j := range b.Jobs {
		switch {
		case j.Outcome == Waiting:
			msg := ""
			if j.Message != "" {
				msg = " (" + j.Message + ")"
			}
			add(CheckUnfinished, j.Name, "job %s never started in %s%s, though the policy admits %d at once with %s",
				j.Name, fmtDur(b.Until.Sub(j.Submitted)), msg, p.Admitted, state)
		case j.Outcome == Unfinished:
			add(CheckUnfinished, j.Name, "job %s started but had not ended when verify stopped watching, %s after submission",
				j.Name, fmtDur(b.Until.Sub(j.Submitted)))
		}
	}
	return out
}

func allEnded(b Batch) bool {
	for _, j := range b.Jobs {
		if j.Ended.IsZero() {
			return false
		}
	}
	return true
}

// cancelOverlap reports the jobs that started after the stop request while
// the cancelled job still ran, with the cause: Argo releases a terminated
// Workflow's lock when it marks the Workflow failed, and only the queue
// (which frees quota when the pod ends) can then hold the next job back.
// It returns the batch with the cancelled job's run cut at the lock's
// release, so that the generic checks do not count the same overlap again.
func cancelOverlap(b Batch) ([]finding.Finding, Batch) {
	c := b.Cancel
	ci := slices.IndexFunc(b.Jobs, func(j Job) bool { return j.Name == c.Job })
	if ci < 0 {
		return nil, b
	}
	cj := b.Jobs[ci]
	if cj.Started().IsZero() {
		return nil, b
	}
	end := cj.Ended
	if end.IsZero() {
		end = b.Until
	}
	req := c.Requested.Truncate(time.Second)
	var out []finding.Finding
	for _, o := range b.Jobs {
		s := o.Started()
		if o.Name == c.Job || s.IsZero() || s.Truncate(time.Second).Before(req) || !s.Truncate(time.Second).Before(end.Truncate(time.Second)) {
			continue
		}
		cause := "Argo released the lock"
		if b.Predicted.Lock != "" {
			cause += " " + b.Predicted.Lock
		}
		if !c.LockReleased.IsZero() {
			cause += fmt.Sprintf(" when it marked the terminated Workflow failed, %s after the stop request and %s before the cancelled pod stopped",
				fmtDur(max(0, c.LockReleased.Sub(c.Requested))), fmtDur(max(0, end.Sub(c.LockReleased))))
		} else {
			cause += " when it marked the terminated Workflow failed, before the cancelled pod stopped"
		}
		if b.Predicted.QuotaAdmits > b.Predicted.Admitted {
			cause += fmt.Sprintf(", and the queue had room (it admits %d with %s, the lock %d), so nothing held %s back", b.Predicted.QuotaAdmits, b.State.Label(), b.Predicted.Admitted, o.Name)
		} else {
			cause += ", and the queue let it in before the cancelled pod's quota was freed"
		}
		msg := fmt.Sprintf("%s: job %s started %s after the stop request while the cancelled job %s still ran (it stopped %s after the request): %s. A job that relies on the lock for exclusive use of the card loses it this way; the guarantee has to come from quota",
			b.Label(), o.Name, fmtDur(max(0, s.Sub(c.Requested))), c.Job, fmtDur(max(0, end.Sub(c.Requested))), cause)
		out = append(out, newFinding(CheckCancelOverlap, o.Name, msg))
	}
	// The lock's place was free from its release; where the lock, not the
	// quota, binds, the next job holding quota beside the stopping one is
	// what the lock allows, so the generic checks count the cancelled job
	// until then.
	lockBound := b.Predicted.QuotaAdmits > b.Predicted.Admitted
	if len(out) == 0 && (c.LockReleased.IsZero() || !lockBound) {
		return nil, b
	}
	cut := c.LockReleased
	if cut.IsZero() || cut.Before(c.Requested) {
		cut = c.Requested
	}
	jobs := slices.Clone(b.Jobs)
	jobs[ci].Ended = cut
	if lockBound && jobs[ci].Released.After(cut) {
		jobs[ci].Released = cut
	}
	b.Jobs = jobs
	return out, b
}
