package verify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
	"github.com/gpupolicy/gpupolicy/verify"
)

// TestVerifyFaults: verify --faults on the lab (Kueue alone, four at once
// with the 7B down), then on the series' policy (the main lock of 4 in
// front of Kueue). One job crashes 5 s after its checks (the simulated
// node ends its container with exit code 1, as a kubelet would) beside
// three others, and a fifth waits; the three finish, the fifth takes the
// crashed job's place once Kueue frees its quota (and, behind the lock,
// once Argo releases its slot, which waits for the crashed workflow's
// requeue), and the report says so. The simulated node has no GPU, so the
// over-allocation is skipped, said why.
func TestVerifyFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := labCluster(t)
	lab := labPolicy(t)
	t.Cleanup(func() {
		if err := clustertest.LabUp(context.Background(), c, lab); err != nil {
			t.Error(err)
		}
	})
	for _, tc := range []struct {
		name string
		p    *policy.Policy
		lock string
		// maxNext bounds the wait from the crash to the fifth job's start.
		maxNext float64
	}{
		{"Kueue alone", lab, "", 3},
		// Argo releases the slot when it reconciles the crashed workflow:
		// 10 s after its pod went Running (DEFAULT_REQUEUE_TIME), 5 s of
		// which the crashed job ran, then 1 s before the waiting workflow
		// takes it (SEMAPHORE_NOTIFY_DELAY) and ~1 s to its container.
		{"Argo lock of 4", clustertest.WithLock(lab, "main", 4), "main", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := clustertest.LabUp(ctx, c, tc.p); err != nil {
				t.Fatal(err)
			}
			o := options(t, tc.p, "faults"+strings.ToLower(tc.lock))
			o.Levels, o.Hold, o.Faults = []int{1}, 10*time.Second, true
			r, err := verify.Run(ctx, clients(t, c), o)
			if err != nil {
				t.Fatal(err)
			}
			writeReport(t, r)
			nothingLeft(t, ctx, c, o.RunID)
			if !r.OK() {
				t.Errorf("findings: %v", r.Findings)
			}
			f := r.Faults
			if f == nil {
				t.Fatal("no fault batch in the report")
			}
			if f.CrashAfterSeconds != 5 || !f.Crashed || f.CrashExitCode == nil || *f.CrashExitCode != 1 {
				t.Errorf("crash after %v s, crashed %v, exit %v; want 5 s, exit 1", f.CrashAfterSeconds, f.Crashed, f.CrashExitCode)
			}
			if !strings.Contains(f.CrashMessage, "exit code 1") {
				t.Errorf("Argo's word on the crashed step: %q, want its exit code", f.CrashMessage)
			}
			if f.RanSeconds == nil || *f.RanSeconds < 4 || *f.RanSeconds > 7 {
				t.Errorf("the crashed job ran %s, want its 5 s", secs(f.RanSeconds))
			}
			if len(f.Beside) != 3 {
				t.Errorf("%d job(s) ran beside the crash (%v), want 3", len(f.Beside), f.Beside)
			}
			if f.Others != 4 || f.OthersSucceeded != 4 {
				t.Errorf("others: %d of %d succeeded, want 4 of 4", f.OthersSucceeded, f.Others)
			}
			if f.OutputsChecked != 0 || !strings.Contains(f.OutputsNote, "job logs unreadable") {
				t.Errorf("outputs checked %d, note %q; a simulated node serves no logs, and the report must say so", f.OutputsChecked, f.OutputsNote)
			}
			if f.QuotaReleasedSeconds == nil || *f.QuotaReleasedSeconds > 2 {
				t.Errorf("Kueue freed the crashed job's quota %s after the crash, want within 2 s", secs(f.QuotaReleasedSeconds))
			}
			if f.Lock != tc.lock {
				t.Errorf("lock %q, want %q", f.Lock, tc.lock)
			}
			if tc.lock == "" && f.LockReleasedSeconds != nil {
				t.Errorf("a lock slot released %s after the crash, but the lab takes no lock", secs(f.LockReleasedSeconds))
			}
			if tc.lock != "" && (f.LockReleasedSeconds == nil || *f.LockReleasedSeconds > 8) {
				t.Errorf("Argo released the crashed job's slot %s after the crash, want within the requeue (≤ 8 s)", secs(f.LockReleasedSeconds))
			}
			if f.Next == "" || f.NextGap == nil || f.NextGap.Seconds > tc.maxNext {
				t.Errorf("next %q gap %+v; want the waiting job to take the place within %.0f s", f.Next, f.NextGap, tc.maxNext)
			} else {
				t.Logf("%s took the crashed job's place %.1f s after the crash, having waited %s; lock slot released %s after the crash",
					f.Next, f.NextGap.Seconds, secs(f.NextWaitedSeconds), secs(f.LockReleasedSeconds))
			}
			if !strings.Contains(f.OverAllocateSkipped, "no job of this run reported a CUDA device") {
				t.Errorf("over-allocation: skipped %q, want skipped for want of a GPU", f.OverAllocateSkipped)
			}
			text := string(verify.Text(r))
			for _, want := range []string{"with 3 other job(s) running beside it", "The others: 4 of 4 succeeded", "Kueue freed its quota", "GPU over-allocation not run"} {
				if !strings.Contains(text, want) {
					t.Errorf("the report lacks %q", want)
				}
			}
		})
	}
}
