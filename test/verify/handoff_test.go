package verify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

// TestVerifyHandoffKueueAlone runs the same batches of 5-second jobs with
// the Argo lock in front of Kueue (the series' policy) and with Kueue alone
// (the lab's policy now)
// gating the step, one at a time and four at once, and compares the
// hand-off by part. With Kueue alone the next job's pod already exists
// (held by Kueue) when the previous one ends, so no Argo requeue
// (DEFAULT_REQUEUE_TIME, 10 s, plus SEMAPHORE_NOTIFY_DELAY, 1 s) stands in
// the hand-off. The simulated node's own delays are unchanged.
func TestVerifyHandoffKueueAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	c := labCluster(t)
	t.Cleanup(func() {
		if err := clustertest.Deploy(context.Background(), c, labPolicy(t)); err != nil {
			t.Error(err)
		}
	})
	lab := labPolicy(t)
	// One at a time: the lock of 1 (the write-up's "before") against Kueue
	// alone with a job that requests the four free shares, so that the
	// queue's quota admits one at a time. Four at once: the lock of 4
	// against Kueue alone at one share a job.
	cases := []struct {
		name  string
		p     *policy.Policy
		level int
		alone bool
	}{
		{"one at a time, Argo lock 1", clustertest.WithLock(lab, "main", 1), 4, false},
		{"one at a time, Kueue alone", kueueAlone(lab, 4), 4, true},
		{"four at once, Argo lock 4", clustertest.WithLock(lab, "main", 4), 6, false},
		{"four at once, Kueue alone", kueueAlone(lab, 1), 6, true},
	}
	reports := make([]*verify.Report, len(cases))
	for i, tc := range cases {
		if err := clustertest.LabUp(ctx, c, tc.p); err != nil {
			t.Fatal(err)
		}
		o := options(t, tc.p, fmt.Sprintf("hoff%d", i))
		o.Levels = []int{tc.level}
		o.Hold = 5 * time.Second
		r, err := verify.Run(ctx, clients(c), o)
		if err != nil {
			t.Fatal(err)
		}
		writeReport(t, r)
		reports[i] = r
		if !r.OK() {
			t.Errorf("%s: findings: %v", tc.name, r.Findings)
		}
		l := r.Levels[0]
		if r.MaxRunning != l.Predicted {
			t.Errorf("%s: ran %d at once, predicted %d", tc.name, r.MaxRunning, l.Predicted)
		}
		nothingLeft(t, ctx, c, o.RunID)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %6s %7s", "hand-off (median s)", "gap", "jobs/min")
	for _, p := range verify.HandoffParts {
		fmt.Fprintf(&b, " %9s", p.ID)
	}
	b.WriteString("\n")
	for i, tc := range cases {
		r := reports[i]
		fmt.Fprintf(&b, "%-28s %6s %7s", tc.name, secs(r.MedianGapSeconds), secs(r.Levels[0].RatePerMin))
		for _, p := range r.Handoff {
			fmt.Fprintf(&b, " %9s", secs(p.MedianSeconds))
		}
		b.WriteString("\n")
	}
	t.Logf("side by side:\n%s", b.String())

	for i, tc := range cases {
		if !tc.alone {
			continue
		}
		r := reports[i]
		before := partMedian(r, verify.PartLock) + partMedian(r, verify.PartPod)
		if before > 1 {
			t.Errorf("%s: %.1f s before the next pod existed at the median; want ≤ 1 s", tc.name, before)
		}
		if r.MedianGapSeconds == nil || *r.MedianGapSeconds > 3 {
			t.Errorf("%s: median gap %s s; want ≤ 3 s", tc.name, secs(r.MedianGapSeconds))
		}
	}
}

func partMedian(r *verify.Report, part string) float64 {
	for _, p := range r.Handoff {
		if p.Part == part && p.MedianSeconds != nil {
			return *p.MedianSeconds
		}
	}
	return 0
}

func secs(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f", *v)
}
