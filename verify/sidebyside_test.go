package verify

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// oneByOne is n 5-second jobs submitted together that ran one at a time:
// the first starting first s after submission, each next gap s after the
// previous end.
func oneByOne(n int, first, gap float64, p Prediction) Batch {
	var jobs []Job
	s := first
	for i := 1; i <= n; i++ {
		jobs = append(jobs, jb(i, 0, s, s+5))
		s += 5 + gap
	}
	return batch(n, 1, p, jobs...)
}

func sideBySideOf(a, c Batch) *SideBySide {
	ra := &Report{RunID: "ab1", Template: "gpu-step-no-cache", Lock: &LockInfo{Name: "main", Size: 1}, HoldSeconds: 5, Batches: []Batch{a}}
	rc := &Report{RunID: "ab2", Template: "gpu-step-no-cache", HoldSeconds: 5, Batches: []Batch{c}}
	Summarize(ra)
	Summarize(rc)
	s := &SideBySide{Environment: "local", Policies: []PolicyReport{
		{PolicyRun: PolicyRun{Label: "lock of 1", Source: "policies/lab at 0e2dcdd"}, Report: ra},
		{PolicyRun: PolicyRun{Label: "Kueue alone", Source: "policies/lab"}, Report: rc},
	}, Restored: Restoration{What: "the render at the pin fdae2c6", Done: true}}
	SummarizeSideBySide(s)
	return s
}

// TestSideBySideWriteup: the write-up's one at a time (eight 5-second jobs,
// 16 s gaps, 10 s to the first start) against the same with 2.5 s gaps and
// 2 s to the first start: 162 s against 59.5 s, 2.7× the rate.
func TestSideBySideWriteup(t *testing.T) {
	s := sideBySideOf(oneByOne(8, 10, 16, pred(1, "lock")), oneByOne(8, 2, 2.5, pred(1, "quota")))
	if !s.OK() {
		t.Fatalf("findings %v", s.Findings)
	}
	if len(s.Levels) != 1 {
		t.Fatalf("levels %+v", s.Levels)
	}
	l := s.Levels[0]
	near(t, "ratio", l.RateRatio, 162/59.5, 1e-9)
	ta, tc := l.Policies[0].Time, l.Policies[1].Time
	if ta == nil || tc == nil {
		t.Fatal("no batch time one at a time")
	}
	if *ta != (BatchTime{FirstStartSeconds: 10, RunsSeconds: 40, GapsSeconds: 112, TotalSeconds: 162}) {
		t.Errorf("lock's batch time %+v", *ta)
	}
	if *tc != (BatchTime{FirstStartSeconds: 2, RunsSeconds: 40, GapsSeconds: 17.5, TotalSeconds: 59.5}) {
		t.Errorf("Kueue alone's batch time %+v", *tc)
	}
	near(t, "median gap", l.Policies[0].MedianGapSeconds, 16, 0)
	near(t, "before the pod", l.Policies[1].BeforePodSeconds, 0.5, 0)
	text := string(SideBySideText(s))
	for _, want := range []string{
		"8 together, one at a time: a batch took 2.7 min under lock of 1 (first start 10 s + runs 40 s + gaps 112 s) and 60 s under Kueue alone (2.0 s + 40 s + 18 s), so Kueue alone completes 2.72× as many jobs a minute.",
		"Restored the render at the pin fdae2c6 on the cluster.",
		"verify: both policies admitted what they predict",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "For twice the rate") {
		t.Errorf("at 2.7× the text should not say what twice would need:\n%s", text)
	}
}

// TestSideBySideLocal: the local cluster's one at a time (the lock's 5 s
// gaps, the lone job's 4.3 s to start) against Kueue alone (2 s gaps, 1 s
// to start), four jobs: 39.3 s against 27 s, 1.46×; for twice the rate
// the lock's gaps would have had to be 9.9 s.
func TestSideBySideLocal(t *testing.T) {
	s := sideBySideOf(oneByOne(4, 4.3, 5, pred(1, "lock")), oneByOne(4, 1, 2, pred(1, "quota")))
	l := s.Levels[0]
	near(t, "ratio", l.RateRatio, 39.3/27, 1e-9)
	near(t, "gap for 2×", l.GapForDouble, (2*27-4.3-20)/3.0, 0.001)
	md := string(SideBySideMarkdown(s))
	for _, want := range []string{
		"# gpupolicy verify, two policies side by side: local — PASS",
		"| 1 | **lock of 1** | policies/lab at 0e2dcdd | gpu-step-no-cache | main: 1 |",
		"| 2 | **Kueue alone** | policies/lab | gpu-step-no-cache | none (Kueue alone) |",
		"| 4 | 6.11 | 8.89 | 1.46× | 1 (1) | 1 (1) |",
		"For twice the rate, lock of 1's gaps would have had to be 9.9 s each, not the 5.0 s measured.",
		"| 4 | lock of 1 | 3 | 5.0 s | 3.0 s |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	dir := t.TempDir()
	if err := WriteSideBySideDir(dir, s); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "report.json", FileHandoff, "1-lock-of-1/report.md", "1-lock-of-1/" + FileRates, "2-kueue-alone/" + FileTimeline} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	svg, _ := os.ReadFile(filepath.Join(dir, FileHandoff))
	if n := strings.Count(string(svg), `<g id="row-`); n != 2 {
		t.Errorf("hand-off chart has %d rows, want one per policy", n)
	}
	for _, want := range []string{">lock of 1<", ">Kueue alone<", ">4 together, 3 hand-off(s)<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("hand-off chart lacks %q", want)
		}
	}
	md2, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(string(md2), "![Jobs completed per minute under lock of 1](1-lock-of-1/rates.svg)") {
		t.Errorf("report.md does not embed the first policy's rate chart")
	}
}

// TestSideBySideRestores: a deploy that fails, and an interrupt during a
// deploy, both end with the environment's render restored and nothing run;
// the deploy interrupted still ran to its end.
func TestSideBySideRestores(t *testing.T) {
	p := labPolicy(t)
	for _, tc := range []struct {
		name      string
		deployErr error
		interrupt bool
	}{
		{"deploy fails", errors.New("apply ClusterQueue/gpu-general: boom"), false},
		{"interrupted while deploying", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var deployed, restored int
			var deployCtxErr error
			o := SideBySideOptions{
				Options:  Options{Hold: time.Second, Levels: []int{1}},
				Policies: []PolicyRun{{Label: "a", Policy: p}, {Label: "b", Policy: p}},
				Deploy: func(dctx context.Context, _ *policy.Policy) error {
					deployed++
					if tc.interrupt {
						cancel()
						time.Sleep(10 * time.Millisecond)
						deployCtxErr = dctx.Err()
					}
					return tc.deployErr
				},
				Restore: func(rctx context.Context) error {
					restored++
					return rctx.Err()
				},
				Restoring: "the render at the pin",
			}
			s, err := RunSideBySide(ctx, Clients{}, o)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.interrupt && !errors.Is(err, ErrInterrupted) {
				t.Errorf("error %v, want ErrInterrupted", err)
			}
			if deployed != 1 || restored != 1 {
				t.Errorf("deployed %d, restored %d; want 1 and 1", deployed, restored)
			}
			if deployCtxErr != nil {
				t.Errorf("the interrupt cut the deploy short: %v", deployCtxErr)
			}
			if !s.Restored.Done || s.OK() != (len(s.Findings) == 0) {
				t.Errorf("restored %+v", s.Restored)
			}
			for _, pr := range s.Policies {
				if pr.Report != nil {
					t.Errorf("%s ran", pr.Label)
				}
			}
		})
	}
}
