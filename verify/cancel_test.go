package verify

import (
	"strings"
	"testing"
)

// TestCancelOverlap: the lock (4) is released when Argo marks the
// terminated Workflow failed at +31, the cancelled pod stops at +35, and
// the queue has room for six (always-on services absent), so the fifth job
// starts at +33 beside it: one finding with its cause, not more-at-once.
func TestCancelOverlap(t *testing.T) {
	c := jb(1, 0, 10, 35)
	c.Outcome = Cancelled
	p := pred(4, "lock")
	p.QuotaAdmits = 6
	p.WithoutAlwaysOn = []string{"llama"}
	b := batch(5, 1, p, c, jb(2, 0, 11, 76), jb(3, 0, 12, 77), jb(4, 0, 13, 78), jb(5, 0, 33, 98))
	b.Kind = CancelBatch
	b.State.AlwaysOnAbsent = []string{"llama"}
	b.Cancel = &Cancel{Job: "job-1", Strategy: "Terminate", Requested: at(30), LockReleased: at(31), Closed: at(35), ClosedBy: "argo", Next: "job-5", NextStarted: at(33)}
	fs := Compare(b)
	if got := strings.Join(ids(fs), ","); got != CheckCancelOverlap {
		t.Fatalf("findings %s: %v", got, fs)
	}
	for _, want := range []string{"job job-5 started 3.0 s after the stop request while the cancelled job job-1 still ran (it stopped 5.0 s after the request)",
		"Argo released the lock main when it marked the terminated Workflow failed, 1.0 s after the stop request and 4.0 s before the cancelled pod stopped",
		"the queue had room (it admits 6 with qwen2-5-7b down; always-on llama holding no quota, the lock 4)", "the guarantee has to come from quota"} {
		if !strings.Contains(fs[0].Message, want) {
			t.Errorf("message lacks %q:\n%s", want, fs[0].Message)
		}
	}
	if !strings.Contains(p.Why(), "predicted without always-on llama, which held no quota, so the queue admits 6") {
		t.Errorf("why: %s", p.Why())
	}
	// The fifth starting after the pod stopped is a plain hand-off.
	b.Jobs[4] = jb(5, 0, 36, 98)
	if fs := Compare(b); len(fs) != 0 {
		t.Errorf("findings after a clean hand-off: %v", fs)
	}
}
