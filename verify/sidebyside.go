package verify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// Side by side (`verify --compare-with`): the same batches under two
// policies on one cluster, in turn — the policy compared with first, then
// the environment's — each policy's render reconciled before its batches,
// and the environment's own render put back at the end, whatever happened
// (a failed deploy, a failed run, Ctrl-C). A deploy or the restore is never
// cut short by an interrupt: it runs to its end (within DeployTimeout), so
// the cluster is left with one whole render, never half of one.

// DeployTimeout bounds one deploy or the restore of a side-by-side run.
const DeployTimeout = 5 * time.Minute

// PolicyRun is one policy of a side-by-side run.
type PolicyRun struct {
	// Label names the policy in the report: the argument that named it
	// ("0e2dcdd", "policies/lab-lock-1") or the environment's policy.
	Label string `json:"label"`
	// Source says where it was read from ("policies/lab at 0e2dcdd").
	Source string         `json:"source"`
	Policy *policy.Policy `json:"-"`
}

// SideBySideOptions configure RunSideBySide.
type SideBySideOptions struct {
	// Options are the batches every policy runs (levels, batches, hold,
	// cancel, faults, …); Policy, Predict and RunID are set per policy
	// (the admission model's prediction for it, the run id with its number
	// appended).
	Options
	// Policies are the two policies, in the order they run.
	Policies []PolicyRun
	// Deploy reconciles a policy's render on the cluster (apply, prune,
	// node readiness); Restore puts the environment's own render back, and
	// Restoring says what that is ("the render at the pin 1a2b3c4").
	Deploy    func(ctx context.Context, p *policy.Policy) error
	Restore   func(ctx context.Context) error
	Restoring string
}

// SideBySide is a side-by-side run: each policy's report, the levels
// compared, and the restore.
type SideBySide struct {
	Environment string    `json:"environment,omitempty"`
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	// Policies are the policies in the order they ran, each with its own
	// report (nil when it did not get to run: Error says why).
	Policies []PolicyReport `json:"policies"`
	// Levels compares each level both policies ran.
	Levels []LevelPair `json:"levels"`
	// Restored is the environment's own render, put back at the end.
	Restored Restoration `json:"restored"`
	// Findings are each run's disagreements with its own policy's
	// prediction, the message prefixed with the policy's label.
	Findings []finding.Finding `json:"findings"`
}

// PolicyReport is one policy's part of a side-by-side run.
type PolicyReport struct {
	PolicyRun
	Report *Report `json:"report,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// Restoration is what was put back at the end of a side-by-side run.
type Restoration struct {
	What  string `json:"what"`
	Done  bool   `json:"done"`
	Error string `json:"error,omitempty"`
}

// OK reports whether both runs agreed with their predictions and the
// environment's render was put back.
func (s *SideBySide) OK() bool { return len(s.Findings) == 0 && s.Restored.Done }

// LevelPair is one level under each policy, in the policies' order.
type LevelPair struct {
	Level    int         `json:"level"`
	Policies []LevelSide `json:"policies"`
	// RateRatio is the second policy's completion rate over the first's.
	RateRatio *float64 `json:"rateRatio,omitempty"`
	// GapForDouble is, one at a time (both policies ran one job at a
	// time), the median gap the first policy would have needed for the
	// second's rate to be twice its own, with its first start and runs as
	// measured: (2 × the second's batch time − the first's first start −
	// its runs) / (level − 1).
	GapForDouble *float64 `json:"gapForDouble,omitempty"`
}

// LevelSide is one level under one policy (nil fields: not measured).
type LevelSide struct {
	RatePerMin *float64 `json:"ratePerMin,omitempty"`
	RateMin    *float64 `json:"rateMin,omitempty"`
	RateMax    *float64 `json:"rateMax,omitempty"`
	// MedianGapSeconds is the whole hand-off's median, BeforePodSeconds
	// the median of its parts before the next pod existed (lock + pod);
	// Handoffs how many there were.
	MedianGapSeconds *float64 `json:"medianGapSeconds,omitempty"`
	BeforePodSeconds *float64 `json:"beforePodSeconds,omitempty"`
	Handoffs         int      `json:"handoffs"`
	// Handoff is each part's median and range.
	Handoff []PartSummary `json:"handoff,omitempty"`
	// MaxRunning is the most that ran at once, Predicted the admission
	// model's count for the level.
	MaxRunning int `json:"maxRunning"`
	Predicted  int `json:"predicted"`
	// Time splits the batches' time, when they ran one job at a time.
	Time *BatchTime `json:"time,omitempty"`
}

// BatchTime splits a one-at-a-time batch's time, from its submission to
// its last job's end, into the first job's start, the jobs' runs (start to
// end) and the gaps between them: Total = FirstStart + Runs + Gaps. Each is
// the mean over the level's batches, in seconds.
type BatchTime struct {
	FirstStartSeconds float64 `json:"firstStartSeconds"`
	RunsSeconds       float64 `json:"runsSeconds"`
	GapsSeconds       float64 `json:"gapsSeconds"`
	TotalSeconds      float64 `json:"totalSeconds"`
}

// RunSideBySide runs o's batches under each of o.Policies in turn: deploy
// its render (o.Deploy), run (Run), then the next; at the end, also on an
// error or an interrupt, it puts the environment's render back (o.Restore).
// The error is for what stopped the run (a failed deploy, an API error, an
// interrupt: ErrInterrupted, a failed restore); the result holds what was
// seen, and its Findings the disagreements.
func RunSideBySide(ctx context.Context, c Clients, o SideBySideOptions) (s *SideBySide, err error) {
	if len(o.Policies) != 2 {
		return nil, fmt.Errorf("verify: side by side takes two policies, not %d", len(o.Policies))
	}
	if o.Deploy == nil || o.Restore == nil {
		return nil, errors.New("verify: side by side needs a deploy and a restore")
	}
	if o.Policies[0].Label == o.Policies[1].Label {
		return nil, fmt.Errorf("verify: the two policies have the same label %q", o.Policies[0].Label)
	}
	// Everything that can fail without the cluster fails before it changes.
	opts := make([]Options, len(o.Policies))
	for i, pr := range o.Policies {
		pred, err := AdmissionPredictor(pr.Policy)
		if err != nil {
			return nil, fmt.Errorf("verify: policy %s: %w", pr.Label, err)
		}
		opts[i] = o.Options
		opts[i].Policy, opts[i].Predict = pr.Policy, pred
		if _, err := newRunner(c, opts[i]); err != nil {
			return nil, fmt.Errorf("verify: policy %s: %w", pr.Label, err)
		}
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	base := o.RunID
	if base == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		base = hex.EncodeToString(b[:])
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "verify: "+format+"\n", args...)
		}
	}
	s = &SideBySide{Environment: o.Environment, Started: now(), Policies: []PolicyReport{}}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DeployTimeout)
		defer cancel()
		progress("restoring %s", o.Restoring)
		s.Restored = Restoration{What: o.Restoring, Done: true}
		if rerr := o.Restore(rctx); rerr != nil {
			s.Restored.Done, s.Restored.Error = false, rerr.Error()
			err = errors.Join(err, fmt.Errorf("verify: restoring %s failed, so the cluster may still hold another policy's render: %w", o.Restoring, rerr))
		}
		s.Finished = now()
		SummarizeSideBySide(s)
	}()
	for i, pr := range o.Policies {
		if ctx.Err() != nil {
			return s, fmt.Errorf("%w: %v", ErrInterrupted, ctx.Err())
		}
		progress("policy %d of 2, %s (%s): reconciling its render", i+1, pr.Label, pr.Source)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DeployTimeout)
		derr := o.Deploy(dctx, pr.Policy)
		cancel()
		if derr != nil {
			s.Policies = append(s.Policies, PolicyReport{PolicyRun: pr, Error: "deploying its render: " + derr.Error()})
			return s, fmt.Errorf("verify: deploying policy %s: %w", pr.Label, derr)
		}
		if ctx.Err() != nil {
			return s, fmt.Errorf("%w: %v", ErrInterrupted, ctx.Err())
		}
		opts[i].RunID = fmt.Sprintf("%s%d", base, i+1)
		rep, rerr := Run(ctx, c, opts[i])
		pr2 := PolicyReport{PolicyRun: pr, Report: rep}
		if rerr != nil {
			pr2.Error = rerr.Error()
		}
		s.Policies = append(s.Policies, pr2)
		if rerr != nil {
			return s, rerr
		}
	}
	return s, nil
}

// SummarizeSideBySide fills Levels and Findings from the policies'
// reports; calling it again gives the same result.
func SummarizeSideBySide(s *SideBySide) {
	s.Findings = []finding.Finding{}
	s.Levels = nil
	for _, p := range s.Policies {
		if p.Report == nil {
			continue
		}
		for _, f := range p.Report.Findings {
			f.Message = p.Label + ": " + f.Message
			s.Findings = append(s.Findings, f)
		}
	}
	if len(s.Policies) != 2 || s.Policies[0].Report == nil || s.Policies[1].Report == nil {
		return
	}
	a, b := s.Policies[0].Report, s.Policies[1].Report
	for _, la := range a.Levels {
		i := slices.IndexFunc(b.Levels, func(l LevelSummary) bool { return l.Level == la.Level })
		if i < 0 {
			continue
		}
		lb := b.Levels[i]
		pair := LevelPair{Level: la.Level, Policies: []LevelSide{levelSide(a, la), levelSide(b, lb)}}
		if la.RatePerMin != nil && lb.RatePerMin != nil && *la.RatePerMin > 0 {
			pair.RateRatio = ptr(*lb.RatePerMin / *la.RatePerMin)
		}
		ta, tb := pair.Policies[0].Time, pair.Policies[1].Time
		if ta != nil && tb != nil && la.Level > 1 {
			pair.GapForDouble = ptr(secs(time.Duration((2*tb.TotalSeconds - ta.FirstStartSeconds - ta.RunsSeconds) / float64(la.Level-1) * float64(time.Second))))
		}
		s.Levels = append(s.Levels, pair)
	}
}

func levelSide(r *Report, l LevelSummary) LevelSide {
	ls := LevelSide{RatePerMin: l.RatePerMin, RateMin: l.RateMin, RateMax: l.RateMax, MedianGapSeconds: l.MedianGapSeconds,
		Handoffs: len(l.Gaps), Handoff: l.Handoff, MaxRunning: l.MaxRunning, Predicted: l.Predicted}
	if len(l.Handoff) >= 2 && l.Handoff[0].MedianSeconds != nil && l.Handoff[1].MedianSeconds != nil {
		ls.BeforePodSeconds = ptr(*l.Handoff[0].MedianSeconds + *l.Handoff[1].MedianSeconds)
	}
	if l.MaxRunning == 1 {
		ls.Time = oneAtATimeTime(r, l.Level)
	}
	return ls
}

// oneAtATimeTime is the mean BatchTime over a level's batches in which
// every job completed; nil when none did.
func oneAtATimeTime(r *Report, level int) *BatchTime {
	var sum BatchTime
	n := 0
	for _, b := range r.Batches {
		if b.Kind != LevelBatch || b.Level != level || len(b.Jobs) == 0 {
			continue
		}
		var first, last time.Time
		runs := 0.0
		complete := true
		for _, j := range b.Jobs {
			s := j.Started()
			if s.IsZero() || j.Ended.IsZero() {
				complete = false
				break
			}
			if first.IsZero() || s.Before(first) {
				first = s
			}
			if j.Ended.After(last) {
				last = j.Ended
			}
			runs += max(0, j.Ended.Sub(s).Seconds())
		}
		if !complete {
			continue
		}
		total := last.Sub(b.Submitted).Seconds()
		f := first.Sub(b.Submitted).Seconds()
		sum.FirstStartSeconds += f
		sum.RunsSeconds += runs
		sum.GapsSeconds += total - f - runs
		sum.TotalSeconds += total
		n++
	}
	if n == 0 {
		return nil
	}
	k := float64(n)
	round := func(v float64) float64 { return secs(time.Duration(v / k * float64(time.Second))) }
	return &BatchTime{FirstStartSeconds: round(sum.FirstStartSeconds), RunsSeconds: round(sum.RunsSeconds),
		GapsSeconds: round(sum.GapsSeconds), TotalSeconds: round(sum.TotalSeconds)}
}
