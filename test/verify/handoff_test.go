package verify_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
	"github.com/gpupolicy/gpupolicy/verify"
)

// kueueAlone returns p with the cache-free GPU step taking no Argo lock
// (Kueue's quota alone gates it) and requesting shares shares a job.
func kueueAlone(p *policy.Policy, shares int64) *policy.Policy {
	q := *p
	q.Templates = map[string]policy.Template{}
	for n, t := range p.Templates {
		if t.CacheFree != nil {
			cf := *t.CacheFree
			cf.Locks = nil
			t.CacheFree = &cf
			t.Request.Shares = shares
		}
		q.Templates[n] = t
	}
	return &q
}

// sideBySide runs the same batches under lock (an Argo lock in front of
// Kueue) and then alone (Kueue alone), each deployed in turn the way the
// lab runs (always-on models up, the 7B down), through
// verify.RunSideBySide; the lab's own policy is put back at the end.
func sideBySide(t *testing.T, ctx context.Context, c *cluster.Cluster, runID string, level int, hold time.Duration, lock, alone verify.PolicyRun) *verify.SideBySide {
	t.Helper()
	lab := labPolicy(t)
	o := options(t, lab, runID)
	o.Levels, o.Hold = []int{level}, hold
	o.Policy, o.Predict = nil, nil
	restored := false
	s, err := verify.RunSideBySide(ctx, clients(t, c), verify.SideBySideOptions{
		Options:  o,
		Policies: []verify.PolicyRun{lock, alone},
		Deploy:   func(ctx context.Context, p *policy.Policy) error { return clustertest.LabUp(ctx, c, p) },
		Restore: func(ctx context.Context) error {
			restored = true
			return clustertest.LabUp(ctx, c, lab)
		},
		Restoring: "policies/lab",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !restored || !s.Restored.Done {
		t.Errorf("the lab's policy was not put back: %+v", s.Restored)
	}
	writeSideBySide(t, s, runID)
	if !s.OK() {
		t.Errorf("findings: %v", s.Findings)
	}
	for _, p := range s.Policies {
		nothingLeft(t, ctx, c, p.Report.RunID)
	}
	if len(s.Levels) != 1 {
		t.Fatalf("levels compared: %+v", s.Levels)
	}
	for i, ls := range s.Levels[0].Policies {
		if ls.MaxRunning != ls.Predicted {
			t.Errorf("%s: ran %d at once, predicted %d", s.Policies[i].Label, ls.MaxRunning, ls.Predicted)
		}
	}
	return s
}

// fastHandoff checks the targets for the hand-off without the Argo lock:
// at the median, at most 1 s before the next pod exists and at most 3 s in
// all.
func fastHandoff(t *testing.T, what string, ls verify.LevelSide) {
	t.Helper()
	if ls.BeforePodSeconds == nil || *ls.BeforePodSeconds > 1 {
		t.Errorf("%s: %s before the next pod at the median; want ≤ 1 s", what, secs(ls.BeforePodSeconds))
	}
	if ls.MedianGapSeconds == nil || *ls.MedianGapSeconds > 3 {
		t.Errorf("%s: median gap %s; want ≤ 3 s", what, secs(ls.MedianGapSeconds))
	}
}

func writeSideBySide(t *testing.T, s *verify.SideBySide, name string) {
	t.Helper()
	dir := filepath.Join(reportDir(t), name)
	if err := verify.WriteSideBySideDir(dir, s); err != nil {
		t.Fatal(err)
	}
	t.Logf("report in %s:\n%s", dir, verify.SideBySideText(s))
}

// TestVerifyHandoffKueueAlone runs the same batches of jobs with the Argo
// lock in front of Kueue (the series' policy) and with Kueue alone (the
// lab's policy now) gating the step, side by side, and compares the
// hand-off by part. With Kueue alone the next job's pod already exists
// (held by Kueue) when the previous one ends, so no Argo requeue
// (DEFAULT_REQUEUE_TIME, 10 s from the ending workflow's first pod event,
// plus SEMAPHORE_NOTIFY_DELAY, 1 s) stands in the hand-off. The simulated
// node's own delays are unchanged.
//
// One at a time, 5-second jobs: the lock of 1 against Kueue alone with a
// job that requests the four free shares, so that the quota admits one at
// a time. The lock's wait before the next pod is what is left of its
// requeue once the job has run: about 10 − 5 + 1 s. Four at once,
// 10-second jobs: the lock of 4 against Kueue alone at one share a job; a
// 10-second run leaves the requeue nothing to absorb, so the lock's wait is
// the write-up's ~10 s.
func TestVerifyHandoffKueueAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	c := labCluster(t)
	lab := labPolicy(t)

	one := sideBySide(t, ctx, c, "hoffa", 4, 5*time.Second,
		verify.PolicyRun{Label: "Argo lock of 1", Source: "policies/lab with the main lock of 1", Policy: clustertest.WithLock(lab, "main", 1)},
		verify.PolicyRun{Label: "Kueue alone, 4 shares a job", Source: "policies/lab, the step asking the 4 free shares", Policy: kueueAlone(lab, 4)})
	l := one.Levels[0]
	lockSide, alone := l.Policies[0], l.Policies[1]
	fastHandoff(t, "one at a time, Kueue alone", alone)
	// The lock's requeue: 10 s from the ending workflow's first pod event
	// (its pod going Running, ~0.5 s before the container starts), of which
	// the 5-second run has used 5, then 1 s for the semaphore's notify: 5
	// to 7 s at 1 s resolution.
	if b := lockSide.BeforePodSeconds; b == nil || *b < 4 || *b > 7.5 {
		t.Errorf("one at a time, Argo lock of 1: %s before the next pod at the median; want the requeue's 10 − 5 + 1 s (4 to 7.5)", secs(b))
	}
	// Why the rate moves by what it does: one at a time a batch is the
	// first start, the runs and the gaps; the runs (4 × 5 s) are the same
	// under both, so the ratio is bounded by the gaps, and twice the rate
	// would need gaps longer than the lock's.
	ta, tc := lockSide.Time, alone.Time
	if ta == nil || tc == nil || l.RateRatio == nil || l.GapForDouble == nil {
		t.Fatalf("one at a time: no batch time or ratio: %+v", l)
	}
	if r := *l.RateRatio; r < 1.25 || r > 2.2 {
		t.Errorf("one at a time: Kueue alone runs %.2f× the lock's rate; want 1.25 to 2.2 (the runs fix the rest)", r)
	}
	if d := *l.RateRatio - ta.TotalSeconds/tc.TotalSeconds; d > 0.01 || d < -0.01 {
		t.Errorf("rate ratio %.3f is not the batches' time ratio %.3f", *l.RateRatio, ta.TotalSeconds/tc.TotalSeconds)
	}
	if ta.RunsSeconds < 19 || tc.RunsSeconds < 19 {
		t.Errorf("runs %s and %s; want 4 × 5 s each", secs(&ta.RunsSeconds), secs(&tc.RunsSeconds))
	}
	t.Logf("one at a time: lock %s (first %.1f + runs %.1f + gaps %.1f), Kueue alone %s (%.1f + %.1f + %.1f): %.2f×; for 2× the lock's gaps would have had to be %.1f s, measured %s",
		secs(&ta.TotalSeconds), ta.FirstStartSeconds, ta.RunsSeconds, ta.GapsSeconds, secs(&tc.TotalSeconds), tc.FirstStartSeconds, tc.RunsSeconds, tc.GapsSeconds,
		*l.RateRatio, *l.GapForDouble, secs(lockSide.MedianGapSeconds))

	four := sideBySide(t, ctx, c, "hoffb", 6, 10*time.Second,
		verify.PolicyRun{Label: "Argo lock of 4", Source: "policies/lab with the main lock of 4 (the series' final policy)", Policy: clustertest.WithLock(lab, "main", 4)},
		verify.PolicyRun{Label: "Kueue alone", Source: "policies/lab", Policy: lab})
	lockSide, alone = four.Levels[0].Policies[0], four.Levels[0].Policies[1]
	fastHandoff(t, "four at once, Kueue alone", alone)
	// A 10-second run: the requeue fires ~10 s after the pod went Running,
	// about as the run ends, so the end's own event waits the full 10 s,
	// then 1 s for the notify.
	if b := lockSide.BeforePodSeconds; b == nil || *b < 8 || *b > 12.5 {
		t.Errorf("four at once, Argo lock of 4: %s before the next pod at the median; want ~10 s", secs(b))
	}
}

func secs(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f s", *v)
}
