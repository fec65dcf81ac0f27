package verify

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// faultBatch is a fault batch as the lab runs it with Kueue alone: four
// admitted at once, five submitted. job-1 is made to crash 5 s after its
// checks; job-2 to job-4 run beside it; job-5 waits and takes its place.
func faultBatch() Batch {
	code := int32(1)
	crash := jb(1, 0, 2, 7)
	crash.Fault, crash.Outcome, crash.ExitCode, crash.Message = FaultCrash, Failed, &code, "Error (exit code 1)"
	crash.Workload = "pod-job-1-abcde"
	jobs := []Job{crash}
	for i := 2; i <= 4; i++ {
		jobs = append(jobs, jb(i, 3, 5, 15))
	}
	next := jb(5, 3, 9, 19)
	next.PodCreated, next.StepStarted, next.Admitted = at(3), at(3), at(8)
	jobs = append(jobs, next)
	b := batch(5, 1, pred(4, "quota"), jobs...)
	b.Kind = FaultBatch
	b.Fault = &Fault{Crash: "job-1", CrashAfterSeconds: 5, ExitCode: 1,
		OverAllocateSkipped: "no job of this run reported a CUDA device", LogsUnreadable: "job logs unreadable (a simulated node serves none)"}
	return b
}

func TestFaultSummary(t *testing.T) {
	r := &Report{Batches: []Batch{faultBatch()}}
	Summarize(r)
	if !r.OK() {
		t.Fatalf("findings: %v", r.Findings)
	}
	f := r.Faults
	if f == nil {
		t.Fatal("no fault summary")
	}
	if !f.Crashed || f.CrashExitCode == nil || *f.CrashExitCode != 1 {
		t.Errorf("crashed %v, exit %v; want crashed with 1", f.Crashed, f.CrashExitCode)
	}
	near(t, "ran", f.RanSeconds, 5, 0)
	if !slices.Equal(f.Beside, []string{"job-2", "job-3", "job-4"}) {
		t.Errorf("beside = %v, want job-2..4", f.Beside)
	}
	near(t, "quota released", f.QuotaReleasedSeconds, 0, 0)
	if f.Lock != "" || f.LockReleasedSeconds != nil {
		t.Errorf("lock %q released %v; want none without a lock", f.Lock, f.LockReleasedSeconds)
	}
	if f.Next != "job-5" || f.NextGap == nil {
		t.Fatalf("next = %q %v, want job-5", f.Next, f.NextGap)
	}
	// Crash at 7, job-5's pod existed since 3 and was admitted at 8,
	// started at 9: 2 s, 1 s of it admission and 1 s container start.
	if f.NextGap.Seconds != 2 {
		t.Errorf("next gap %.1f s, want 2", f.NextGap.Seconds)
	}
	for i, want := range []float64{0, 0, 1, 1} {
		if p := f.NextGap.Parts[i]; p.Seconds == nil || *p.Seconds != want {
			t.Errorf("part %s = %v, want %v", p.Part, p.Seconds, want)
		}
	}
	near(t, "next waited", f.NextWaitedSeconds, 6, 0)
	if f.Others != 4 || f.OthersSucceeded != 4 || f.OutputsChecked != 0 || !strings.Contains(f.OutputsNote, "simulated node") {
		t.Errorf("others %d/%d, outputs %d, note %q", f.OthersSucceeded, f.Others, f.OutputsChecked, f.OutputsNote)
	}
	text := strings.Join(faultSentences(f), "\n")
	for _, want := range []string{
		"job job-1 was made to crash 5.0 s after its checks (exit code 1): it ended with exit code 1 after running 5.0 s",
		"with 3 other job(s) running beside it (job-2, job-3, job-4)",
		"The others: 4 of 4 succeeded; their outputs were not read (job logs unreadable",
		"Kueue freed its quota 0.0 s after the crash",
		"the template takes no lock",
		"job-5 took its place 2.0 s after the crash, having waited 6.0 s since its submission (Kueue admission 1.0 s, scheduling and container start 1.0 s)",
		"GPU over-allocation not run: no job of this run reported a CUDA device.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("fault sentences lack %q:\n%s", want, text)
		}
	}
	if md := string(Markdown(r)); !strings.Contains(md, "## Faults beside others") || !strings.Contains(md, "failed (made to: crash), exit code 1") {
		t.Errorf("markdown lacks the fault section or the crashed job's row:\n%s", md)
	}
}

// TestFaultLock: behind a lock, the summary says when Argo released the
// crashed job's slot; a slot or quota never released is a finding.
func TestFaultLock(t *testing.T) {
	b := faultBatch()
	b.Predicted = pred(4, "lock")
	b.Fault.LockReleased = at(8)
	r := &Report{Batches: []Batch{b}}
	Summarize(r)
	if !r.OK() {
		t.Fatalf("findings: %v", r.Findings)
	}
	if r.Faults.Lock != "main" {
		t.Errorf("lock %q, want main", r.Faults.Lock)
	}
	near(t, "lock released", r.Faults.LockReleasedSeconds, 1, 0)

	// Neither the quota nor the slot released.
	b = faultBatch()
	b.Predicted = pred(4, "lock")
	b.Jobs[0].Released = time.Time{}
	r = &Report{Batches: []Batch{b}}
	Summarize(r)
	if got := ids(r.Findings); !slices.Equal(got, []string{CheckFaultNotReleased}) {
		t.Fatalf("findings %v, want fault-not-released", got)
	}
	msg := r.Findings[0].Message
	for _, want := range []string{"job-1 crashed (exit code 1) but still held its quota (its Workload pod-job-1-abcde never became Finished) and its slot of lock main"} {
		if !strings.Contains(msg, want) {
			t.Errorf("finding %q lacks %q", msg, want)
		}
	}
}

// TestFaultNotInjected: a crash that did not happen is a finding, and a
// job beside it that failed is one too, naming the crash; the crashing
// job's own failure is not.
func TestFaultNotInjected(t *testing.T) {
	b := faultBatch()
	zero := int32(0)
	b.Jobs[0].ExitCode, b.Jobs[0].Outcome = &zero, Succeeded
	r := &Report{Batches: []Batch{b}}
	Summarize(r)
	if got := ids(r.Findings); !slices.Equal(got, []string{CheckFaultNotInjected}) {
		t.Fatalf("findings %v, want fault-not-injected", got)
	}
	if !strings.Contains(r.Findings[0].Message, "made to crash with exit code 1, ended with exit code 0") {
		t.Errorf("message: %s", r.Findings[0].Message)
	}

	b = faultBatch()
	b.Jobs[2].Outcome, b.Jobs[2].Message = Failed, "OOMKilled"
	r = &Report{Batches: []Batch{b}}
	Summarize(r)
	if got := ids(r.Findings); !slices.Equal(got, []string{CheckJobFailed}) {
		t.Fatalf("findings %v, want job-failed", got)
	}
	if !strings.Contains(r.Findings[0].Message, "job job-3 failed beside the job made to crash (job-1): OOMKilled") {
		t.Errorf("message: %s", r.Findings[0].Message)
	}
	if r.Faults.OthersSucceeded != 3 {
		t.Errorf("others succeeded %d, want 3", r.Faults.OthersSucceeded)
	}
}
