package verify

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/finding"
)

// Report is what a verify run found: the figures of the write-ups
// (completion rate per level against one lone job's rate × n, the median
// hand-off gap, the concurrency reached, the cancel timings, per-job
// stamps), GPU memory, and the disagreements with the admission model.
// Summarize builds it from observed stamps alone, so it can be tested
// with hand-made stamps.
type Report struct {
	RunID       string `json:"runId"`
	Environment string `json:"environment,omitempty"`
	Policy      string `json:"policy,omitempty"`
	Namespace   string `json:"namespace"`
	Template    string `json:"template"`
	Priority    string `json:"priority"`
	// HoldSeconds is how long each job held the GPU idle after its work.
	HoldSeconds float64 `json:"holdSeconds"`
	// Lock is the step's lock in the policy and on the cluster.
	Lock *LockInfo `json:"lock,omitempty"`
	// Started and Finished bound the run.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`

	Levels []LevelSummary `json:"levels"`
	// LoneRatePerMin is level 1's completion rate: one job alone.
	LoneRatePerMin *float64 `json:"loneRatePerMin,omitempty"`
	// MedianGapSeconds is the median, over every hand-off of every level
	// batch, of the time from one job's end to the start of the job that
	// took its place.
	MedianGapSeconds *float64 `json:"medianGapSeconds,omitempty"`
	// Handoff is every level's hand-offs by part (see HandoffParts), and
	// HandoffResolutionSeconds the API stamps' resolution they rest on.
	Handoff                  []PartSummary `json:"handoff,omitempty"`
	HandoffResolutionSeconds float64       `json:"handoffResolutionSeconds,omitempty"`
	// MaxRunning is the most jobs seen running at once.
	MaxRunning int            `json:"maxRunning"`
	Cancel     *CancelSummary `json:"cancel,omitempty"`
	// Faults is the fault batch's summary (Options.Faults).
	Faults *FaultSummary `json:"faults,omitempty"`
	// Exclusive is the exclusive batch's (Options.Exclusive).
	Exclusive *ExclusiveRun `json:"exclusive,omitempty"`
	GPUMemory GPUMemory     `json:"gpuMemory"`
	// Findings are the disagreements with the prediction; none means the
	// cluster admitted exactly what the policy predicts.
	Findings []finding.Finding `json:"findings"`
	// Notes are observations that are not disagreements.
	Notes   []string `json:"notes,omitempty"`
	Batches []Batch  `json:"batches"`
	// Cleanup says what verify deleted and whether anything was left.
	Cleanup *Cleanup `json:"cleanup,omitempty"`
}

// OK reports whether the run found no disagreement.
func (r *Report) OK() bool { return len(r.Findings) == 0 }

// LockInfo is the step's smallest lock.
type LockInfo struct {
	Name string `json:"name"`
	// Size is the policy's size; Live the size in the cluster's semaphore
	// ConfigMap (nil when it could not be read).
	Size int  `json:"size"`
	Live *int `json:"live,omitempty"`
}

// LevelSummary is one level: n jobs submitted together, Batches times.
type LevelSummary struct {
	Level     int `json:"level"`
	Batches   int `json:"batches"`
	Jobs      int `json:"jobs"`
	Completed int `json:"completed"`
	// RatePerMin is the mean of the batches' rates; a batch's rate is its
	// completed jobs over the time from its submission to its last job's
	// end. RateMin and RateMax are the range across batches.
	RatePerMin *float64  `json:"ratePerMin,omitempty"`
	RateMin    *float64  `json:"rateMin,omitempty"`
	RateMax    *float64  `json:"rateMax,omitempty"`
	BatchRates []float64 `json:"batchRates,omitempty"`
	// ExpectedPerMin is one lone job's rate × n, and Ratio the level's rate
	// over the lone rate (n would be perfectly linear).
	ExpectedPerMin *float64 `json:"expectedPerMin,omitempty"`
	Ratio          *float64 `json:"ratio,omitempty"`
	// MedianGapSeconds is the median hand-off gap within the level's
	// batches (only levels where some job waited for another have one).
	MedianGapSeconds *float64 `json:"medianGapSeconds,omitempty"`
	Gaps             []Gap    `json:"gaps,omitempty"`
	// Handoff is the level's hand-offs by part: each part's median and
	// range.
	Handoff []PartSummary `json:"handoff,omitempty"`
	// MaxRunning and MaxAdmitted are the most jobs running (container or
	// own start to end) and holding Kueue quota at once, over its batches.
	MaxRunning  int `json:"maxRunning"`
	MaxAdmitted int `json:"maxAdmitted"`
	// Predicted is min(level, the prediction's count) for the level's
	// first batch's state.
	Predicted int `json:"predicted"`
	// Starved is set when the prediction was zero: the level's jobs were
	// watched waiting, not run.
	Starved bool `json:"starved,omitempty"`
}

// Gap is one hand-off: Job started Seconds after After ended.
type Gap struct {
	Batch   string  `json:"batch"`
	Job     string  `json:"job"`
	After   string  `json:"after"`
	Seconds float64 `json:"seconds"`
	// Parts split Seconds by HandoffParts.
	Parts []GapPart `json:"parts,omitempty"`
}

// CancelSummary is the cancel's timings.
type CancelSummary struct {
	Cancel
	Batch string `json:"batch"`
	// CloseSeconds is from the request to the job's end; HandoffSeconds
	// from its end to the next job's start.
	CloseSeconds   *float64 `json:"closeSeconds,omitempty"`
	HandoffSeconds *float64 `json:"handoffSeconds,omitempty"`
	// Others and OthersSucceeded count the batch's other jobs.
	Others          int `json:"others"`
	OthersSucceeded int `json:"othersSucceeded"`
}

// Cleanup is what verify removed at the end.
type Cleanup struct {
	Deleted []string `json:"deleted"`
	// Left lists what was still there when verify gave up waiting.
	Left []string `json:"left,omitempty"`
}

// Summarize computes the report's figures and findings from the batches
// (rates, gaps, concurrency, cancel timings) and compares each batch with
// its prediction. It fills Levels, LoneRatePerMin, MedianGapSeconds,
// MaxRunning, Cancel, Faults and Findings of r from r.Batches and r.Cleanup, and
// adds its observations to Notes; calling it again gives the same report.
func Summarize(r *Report) {
	r.Levels = nil
	r.LoneRatePerMin, r.MedianGapSeconds, r.Cancel, r.Faults, r.Exclusive = nil, nil, nil, nil, nil
	r.Handoff, r.HandoffResolutionSeconds = nil, 0
	r.MaxRunning = 0
	r.Findings = []finding.Finding{}
	note := func(n string) {
		if !slices.Contains(r.Notes, n) {
			r.Notes = append(r.Notes, n)
		}
	}
	var levelOrder []int
	byLevel := map[int][]int{}
	for i, b := range r.Batches {
		if b.Kind != LevelBatch {
			continue
		}
		if _, ok := byLevel[b.Level]; !ok {
			levelOrder = append(levelOrder, b.Level)
		}
		byLevel[b.Level] = append(byLevel[b.Level], i)
	}
	var allGaps []float64
	var allGapRows []Gap
	for _, n := range levelOrder {
		ls := LevelSummary{Level: n}
		var gaps []float64
		for k, i := range byLevel[n] {
			b := r.Batches[i]
			ls.Batches++
			ls.Jobs += len(b.Jobs)
			if k == 0 {
				ls.Predicted = min(n, b.Predicted.Admitted)
			}
			if b.StarveWatchSeconds > 0 {
				ls.Starved = true
			}
			for _, j := range b.Jobs {
				if j.Outcome == Succeeded {
					ls.Completed++
				}
			}
			if rate, ok := BatchRate(b); ok {
				ls.BatchRates = append(ls.BatchRates, rate)
			}
			ls.MaxRunning = max(ls.MaxRunning, MaxRunning(b))
			ls.MaxAdmitted = max(ls.MaxAdmitted, MaxAdmitted(b))
			for _, g := range Gaps(b) {
				ls.Gaps = append(ls.Gaps, g)
				gaps = append(gaps, g.Seconds)
			}
		}
		if len(ls.BatchRates) > 0 {
			ls.RatePerMin = ptr(mean(ls.BatchRates))
			ls.RateMin = ptr(slices.Min(ls.BatchRates))
			ls.RateMax = ptr(slices.Max(ls.BatchRates))
		}
		if m, ok := Median(gaps); ok {
			ls.MedianGapSeconds = ptr(m)
		}
		ls.Handoff = summarizeParts(ls.Gaps)
		allGapRows = append(allGapRows, ls.Gaps...)
		allGaps = append(allGaps, gaps...)
		r.MaxRunning = max(r.MaxRunning, ls.MaxRunning)
		r.Levels = append(r.Levels, ls)
	}
	sort.SliceStable(r.Levels, func(a, b int) bool { return r.Levels[a].Level < r.Levels[b].Level })
	for _, ls := range r.Levels {
		if ls.Level == 1 && ls.RatePerMin != nil {
			r.LoneRatePerMin = ptr(*ls.RatePerMin)
		}
	}
	if r.LoneRatePerMin != nil && *r.LoneRatePerMin > 0 {
		for i := range r.Levels {
			ls := &r.Levels[i]
			ls.ExpectedPerMin = ptr(*r.LoneRatePerMin * float64(ls.Level))
			if ls.RatePerMin != nil {
				ls.Ratio = ptr(*ls.RatePerMin / *r.LoneRatePerMin)
			}
		}
	}
	if m, ok := Median(allGaps); ok {
		r.MedianGapSeconds = ptr(m)
		r.Handoff = summarizeParts(allGapRows)
		r.HandoffResolutionSeconds = HandoffResolutionSeconds
	}
	for _, b := range r.Batches {
		switch b.Kind {
		case CancelBatch:
			r.MaxRunning = max(r.MaxRunning, MaxRunning(b))
			if b.Cancel != nil {
				r.Cancel = summarizeCancel(b)
			}
		case FaultBatch:
			r.MaxRunning = max(r.MaxRunning, MaxRunning(b))
			if b.Fault != nil {
				r.Faults = summarizeFault(b)
			}
		case ExclusiveBatch:
			r.Exclusive = b.Exclusive
		}
	}
	for _, b := range r.Batches {
		r.Findings = append(r.Findings, Compare(b)...)
		if b.StateAfter != nil && !b.State.Same(*b.StateAfter) {
			note(fmt.Sprintf("%s: the service state changed during the batch (%s → %s); the batch is not compared with the prediction",
				b.Label(), b.State.Label(), b.StateAfter.Label()))
		}
		if b.StarveWatchSeconds > 0 && !anyAdmitted(b) {
			note(fmt.Sprintf("%s: as predicted with %s, no %s job was admitted (%s): %d waited %s and none started (a pod the queue holds never starts, so its time limit never runs)",
				b.Label(), b.State.Label(), r.Priority, b.Predicted.Why(), len(b.Jobs), fmtSecs(b.StarveWatchSeconds)))
			for _, e := range b.Predicted.Explain {
				note("explain predicted it: " + e)
			}
		}
	}
	if r.Cleanup != nil && len(r.Cleanup.Left) > 0 {
		r.Findings = append(r.Findings, newFinding(CheckCleanup, "", "left behind after cleanup: "+strings.Join(r.Cleanup.Left, ", ")))
	}
}

func summarizeCancel(b Batch) *CancelSummary {
	c := *b.Cancel
	cs := &CancelSummary{Cancel: c, Batch: b.Label()}
	if !c.Closed.IsZero() {
		cs.CloseSeconds = ptr(secs(c.Closed.Sub(c.Requested)))
		if !c.NextStarted.IsZero() {
			cs.HandoffSeconds = ptr(secs(c.NextStarted.Sub(c.Closed)))
		}
	}
	for _, j := range b.Jobs {
		if j.Name == c.Job {
			continue
		}
		cs.Others++
		if j.Outcome == Succeeded {
			cs.OthersSucceeded++
		}
	}
	return cs
}

// BatchRate is a batch's completion rate in jobs per minute: its completed
// jobs over the time from its submission to its last job's end. ok is false
// when no job completed.
func BatchRate(b Batch) (float64, bool) {
	completed := 0
	var last time.Time
	for _, j := range b.Jobs {
		if j.Outcome == Succeeded {
			completed++
		}
		if j.Ended.After(last) {
			last = j.Ended
		}
	}
	if completed == 0 || !last.After(b.Submitted) {
		return 0, false
	}
	return float64(completed) / last.Sub(b.Submitted).Minutes(), true
}

// span is one job's interval in a batch. Overlaps are judged on whole
// seconds: API stamps are truncated to the second while verify's own
// observations (a pod seen gone) and the job's stamps are not, and
// comparing a truncated start with a precise end would see an overlap that
// did not happen. Truncating every stamp keeps their order (never makes a
// later start look earlier than an end), so a hand-off within one second
// counts as a hand-off, not an overlap.
type span struct {
	job        int // index into Batch.Jobs
	start, end time.Time
}

func newSpan(job int, start, end time.Time) span {
	if end.Before(start) {
		end = start
	}
	return span{job, start.Truncate(time.Second), end.Truncate(time.Second)}
}

// runningSpans are the jobs' running intervals, from Started to Ended (or
// to the end of the watch), ordered by start then index.
func runningSpans(b Batch) []span {
	var out []span
	for i, j := range b.Jobs {
		s := j.Started()
		if s.IsZero() {
			continue
		}
		e := j.Ended
		if e.IsZero() {
			e = b.Until
		}
		out = append(out, newSpan(i, s, e))
	}
	sortSpans(out)
	return out
}

// admittedSpans are the jobs' Kueue quota intervals, from Admitted to
// Released (else Ended, else the end of the watch).
func admittedSpans(b Batch) []span {
	var out []span
	for i, j := range b.Jobs {
		if j.Admitted.IsZero() {
			continue
		}
		e := j.Released
		if e.IsZero() {
			e = j.Ended
		}
		if e.IsZero() {
			e = b.Until
		}
		out = append(out, newSpan(i, j.Admitted, e))
	}
	sortSpans(out)
	return out
}

func sortSpans(s []span) {
	sort.SliceStable(s, func(a, b int) bool {
		if !s[a].start.Equal(s[b].start) {
			return s[a].start.Before(s[b].start)
		}
		return s[a].job < s[b].job
	})
}

// maxOverlap is the most spans open at once. A span that ends at the
// instant another starts does not overlap it: API stamps are truncated to
// the second, and truncation never makes a later start look earlier than
// an end, so ties are hand-offs.
func maxOverlap(spans []span) int {
	type ev struct {
		t     time.Time
		delta int
	}
	var evs []ev
	for _, s := range spans {
		evs = append(evs, ev{s.start, +1}, ev{s.end, -1})
	}
	sort.SliceStable(evs, func(a, b int) bool {
		if !evs[a].t.Equal(evs[b].t) {
			return evs[a].t.Before(evs[b].t)
		}
		return evs[a].delta < evs[b].delta
	})
	cur, best := 0, 0
	for _, e := range evs {
		cur += e.delta
		best = max(best, cur)
	}
	return best
}

// MaxRunning is the most jobs of a batch running at once.
func MaxRunning(b Batch) int { return maxOverlap(runningSpans(b)) }

// MaxAdmitted is the most jobs of a batch holding Kueue quota at once.
func MaxAdmitted(b Batch) int { return maxOverlap(admittedSpans(b)) }

// Gaps are a batch's hand-offs. With c the most jobs that ran at once, the
// job that started r-th (from 0) took the place freed by the (r−c)-th end
// (from 0) when r ≥ c; its gap runs from that end to its start. One at a
// time (c = 1), that is each job's start less the previous job's end; four
// at once with five submitted, the fifth's start less the first end.
func Gaps(b Batch) []Gap {
	run := runningSpans(b)
	c := maxOverlap(run)
	type end struct {
		t   time.Time
		job int
	}
	var ends []end
	for i, j := range b.Jobs {
		if !j.Ended.IsZero() && !j.Started().IsZero() {
			ends = append(ends, end{j.Ended, i})
		}
	}
	sort.SliceStable(ends, func(a, c int) bool {
		if !ends[a].t.Equal(ends[c].t) {
			return ends[a].t.Before(ends[c].t)
		}
		return ends[a].job < ends[c].job
	})
	var out []Gap
	for r, s := range run {
		k := r - c
		if c == 0 || k < 0 || k >= len(ends) {
			continue
		}
		e := ends[k]
		start := b.Jobs[s.job].Started()
		if e.job == s.job || e.t.Truncate(time.Second).After(s.start) {
			continue
		}
		out = append(out, Gap{Batch: b.Label(), Job: b.Jobs[s.job].Name, After: b.Jobs[e.job].Name, Seconds: secs(max(0, start.Sub(e.t))),
			Parts: gapParts(e.t, b.Jobs[s.job])})
	}
	return out
}

func anyAdmitted(b Batch) bool {
	for _, j := range b.Jobs {
		if !j.Admitted.IsZero() || !j.Started().IsZero() {
			return true
		}
	}
	return false
}

// Median is the middle value (the mean of the two middle ones for an even
// count); ok is false for no values.
func Median(xs []float64) (float64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

func mean(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

func ptr[T any](v T) *T { return &v }

func secs(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

func itoa(n int) string { return strconv.Itoa(n) }

// fmtDur prints a duration the lab's way: "16 s", "5.3 s", "2.7 min".
func fmtDur(d time.Duration) string { return fmtSecs(d.Seconds()) }

func fmtSecs(s float64) string {
	switch {
	case math.Abs(s) >= 120:
		return strconv.FormatFloat(s/60, 'f', 1, 64) + " min"
	case math.Abs(s) >= 10:
		return strconv.FormatFloat(math.Round(s), 'f', 0, 64) + " s"
	default:
		return strconv.FormatFloat(s, 'f', 1, 64) + " s"
	}
}
