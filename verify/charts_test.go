package verify

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

// writeupLevels are hand-made stamps giving the first write-up's rates:
// one to four cache-free jobs together, three batches each (the middle
// batch at the write-up's rate, the others 3% either side), and one batch
// of five, two rounds, at 1.92 jobs/min. A batch of n at rate q ends
// n/q minutes after its submission.
func writeupLevels() *Report {
	p := pred(4, "lock")
	var bs []Batch
	for n, q := range map[int]float64{1: 0.81, 2: 1.69, 3: 2.47, 4: 3.24} {
		for i, f := range []float64{0.97, 1, 1.03} {
			end := float64(n) * 60 / (q * f)
			var jobs []Job
			for k := 1; k <= n; k++ {
				jobs = append(jobs, jb(k, 0, 10+float64(k-1), end-float64(n-k)))
			}
			bs = append(bs, batch(n, i+1, p, jobs...))
		}
	}
	// Five: four run, the fifth starts 16 s after the first end; the batch
	// ends 5/1.92 minutes after submission.
	end5 := 5 * 60 / 1.92
	bs = append(bs, batch(5, 1, p, jb(1, 0, 10, 75), jb(2, 0, 11, 76), jb(3, 0, 12, 77), jb(4, 0, 13, 78), jb(5, 0, 91, end5)))
	r := &Report{HoldSeconds: 60, Batches: bs}
	Summarize(r)
	return r
}

func TestRateChartGeometryWriteup(t *testing.T) {
	r := writeupLevels()
	if !r.OK() {
		t.Fatalf("findings: %v", r.Findings)
	}
	c, ok := rateGeometry(r)
	if !ok || len(c.Points) != 5 || c.MaxLevel != 5 {
		t.Fatalf("geometry: %+v", c)
	}
	want := map[int]float64{1: 0.81, 2: 1.69, 3: 2.47, 4: 3.24, 5: 1.92}
	// Mean of q/0.97, q, q/1.03.
	meanOf := func(q float64) float64 { return (q*0.97 + q + q*1.03) / 3 }
	for _, p := range c.Points {
		q := want[p.Level]
		if p.Level < 5 {
			q = meanOf(q)
		}
		if math.Abs(p.Rate-q) > 0.005 {
			t.Errorf("level %d: rate %.3f, want %.3f", p.Level, p.Rate, q)
		}
		// The point sits at its rate on a linear axis from 0 at the plot's
		// bottom to YMax at its top.
		if wantY := c.Top + c.PlotH*(1-p.Rate/c.YMax); math.Abs(p.Y-wantY) > 1e-9 {
			t.Errorf("level %d: y %.2f, want %.2f", p.Level, p.Y, wantY)
		}
		// Levels are evenly spaced.
		if wantX := c.Left + c.PlotW*float64(p.Level)/5.5; math.Abs(p.X-wantX) > 1e-9 {
			t.Errorf("level %d: x %.2f, want %.2f", p.Level, p.X, wantX)
		}
		// The range brackets the point; a single batch has none.
		if p.Level < 5 && !(p.YLow > p.Y && p.YHigh < p.Y) {
			t.Errorf("level %d: range %.1f–%.1f does not bracket %.1f", p.Level, p.YLow, p.YHigh, p.Y)
		}
		if p.Level == 5 && (p.YLow != p.Y || p.YHigh != p.Y || p.Batches != 1) {
			t.Errorf("level 5: one batch, no range: %+v", p)
		}
	}
	// The axis reaches lone × 5 (4.05) and is a round number.
	lone := *r.LoneRatePerMin
	if math.Abs(lone-meanOf(0.81)) > 0.005 || c.YMax < 5*lone || c.YMax > 6 || c.YStep != 1 {
		t.Errorf("lone %.3f, y axis to %.2f step %.2f", lone, c.YMax, c.YStep)
	}
	// Lone × n: at level 1 it is the lone point; four at once sit near the
	// line (3.24 is 4.0× 0.81), five fall well below it (1.92 < 4.05).
	if len(c.Lone) != 5 || math.Abs(c.Lone[0][1]-c.Points[0].Y) > 1e-9 {
		t.Errorf("lone line %v vs level 1 at %.2f", c.Lone, c.Points[0].Y)
	}
	px := func(rate float64) float64 { return c.PlotH * rate / c.YMax }
	if d := c.Points[3].Y - c.Lone[3][1]; math.Abs(d) > px(0.05) {
		t.Errorf("four at once %.1f px off the lone × 4 line", d)
	}
	if c.Points[4].Y <= c.Points[2].Y || c.Points[4].Y-c.Lone[4][1] < px(2) {
		t.Errorf("five (y %.1f) should sit below three (%.1f) and 2 jobs/min below lone × 5 (%.1f)", c.Points[4].Y, c.Points[2].Y, c.Lone[4][1])
	}

	svg := RateChart(r)
	if !bytes.Equal(svg, RateChart(r)) {
		t.Fatal("rate chart not deterministic")
	}
	wellFormed(t, svg)
	for _, want := range []string{"Jobs completed per minute, by how many were submitted together", "jobs submitted together", "one job alone", "3.24", "1.92", "lone × 5 = 4.05", "the range across batches"} {
		if !bytes.Contains(svg, []byte(esc(want))) {
			t.Errorf("rate chart lacks %q", want)
		}
	}
	if n := bytes.Count(svg, []byte("<circle")); n != 6 {
		t.Errorf("%d circles, want five points and a legend swatch", n)
	}
}

func TestRateChartEmpty(t *testing.T) {
	svg := RateChart(&Report{})
	wellFormed(t, svg)
	if !bytes.Contains(svg, []byte("no rate to chart")) {
		t.Errorf("empty chart: %s", svg)
	}
}

// handoffJob is the next job of a hand-off after a job that ended at end:
// Argo started its step lock s later, its pod appeared at pod (an API stamp,
// whole seconds), the queue admitted it at adm, its container started at
// cont and the job's own start stamp is js (seconds after end; js < 0: no
// log).
func handoffJob(end, lock, pod, adm, cont, js float64) Job {
	j := Job{Name: "next", Index: 2, Submitted: at(0), Outcome: Succeeded,
		StepStarted: at(end + lock), PodCreated: at(end + pod).Truncate(time.Second), Admitted: at(end + adm).Truncate(time.Second),
		ContainerStarted: at(end + cont).Truncate(time.Second), Ended: at(end + js + 10)}
	if js >= 0 {
		j.JobStart = at(end + js)
	}
	return j
}

func partSecs(ps []GapPart) string {
	var out []string
	for _, p := range ps {
		if p.Seconds == nil {
			out = append(out, p.Part+"=?")
		} else {
			out = append(out, fmt.Sprintf("%s=%g", p.Part, *p.Seconds))
		}
	}
	return strings.Join(out, " ")
}

func TestGapParts(t *testing.T) {
	end := at(20.4)
	// The write-up's one-at-a-time hand-off: 16 s, about 9.6 s of it before
	// the pod existed, admission the same second, container start 2 to 3 s,
	// start-up 3 to 4.
	// Step at 29.9, pod stamp 30, admitted 30, container 32, own start 36.4.
	got := partSecs(gapParts(end, handoffJob(20.4, 9.5, 9.6, 9.7, 12.4, 16)))
	if got != "lock=9.5 pod=0.1 admission=0 container=2 startup=4.4" {
		t.Errorf("parts: %s", got)
	}
	// A pod stamp that truncates to before the step's start moves nothing
	// backwards: the part is 0 and the first part carries the rounding.
	// Pod and admission stamps truncate to 20, before the end at 20.4.
	got = partSecs(gapParts(end, handoffJob(20.4, 0.3, 0.5, 0.5, 2.7, 6.5)))
	if got != "lock=0.3 pod=0 admission=0 container=2.3 startup=3.9" {
		t.Errorf("parts with a truncated pod stamp: %s", got)
	}
	// No job log: the gap ends at the container's start, start-up unknown.
	got = partSecs(gapParts(end, handoffJob(20.4, 9.5, 9.6, 9.7, 12.4, -1)))
	if got != "lock=9.5 pod=0.1 admission=0 container=2 startup=?" {
		t.Errorf("parts without a log: %s", got)
	}
	// Lock bigger than the quota: the pod existed before the end, so the
	// whole gap is the queue's admission and the container's start.
	j := handoffJob(20.4, -30, -30, 3, 5, -1)
	got = partSecs(gapParts(end, j))
	if got != "lock=0 pod=0 admission=2.6 container=2 startup=?" {
		t.Errorf("parts waiting on the queue: %s", got)
	}
}

// handoffBatch is the write-up's eight jobs one at a time with the gaps
// split as in its figure 3.
func handoffBatch(withLog bool) Batch {
	locks := []float64{9, 10, 8.5, 11, 9.5, 8, 10.5}
	var jobs []Job
	e := 15.0
	first := jb(1, 0, 10, e)
	jobs = append(jobs, first)
	for i, l := range locks {
		js := l + 6.5
		if !withLog {
			js = -1
		}
		j := handoffJob(e, l, l+0.2, l+0.3, l+2.7, js)
		j.Name, j.Index = fmt.Sprintf("job-%d", i+2), i+2
		jobs = append(jobs, j)
		e = j.Ended.Sub(t0).Seconds()
	}
	return batch(8, 1, pred(1, "lock"), jobs...)
}

func TestHandoffSummary(t *testing.T) {
	r := &Report{HoldSeconds: 0, Batches: []Batch{handoffBatch(true)}}
	Summarize(r)
	if !r.OK() {
		t.Fatalf("findings: %v", r.Findings)
	}
	l := r.Levels[0]
	if len(l.Gaps) != 7 || len(l.Handoff) != 5 || len(r.Handoff) != 5 || r.HandoffResolutionSeconds != 1 {
		t.Fatalf("gaps %d, handoff %+v", len(l.Gaps), l.Handoff)
	}
	for _, g := range l.Gaps {
		sum := 0.0
		for _, p := range g.Parts {
			sum += *p.Seconds
		}
		if math.Abs(sum-g.Seconds) > 1e-6 {
			t.Errorf("%s: parts add to %.3f, gap %.3f", g.Job, sum, g.Seconds)
		}
	}
	lock := l.Handoff[0]
	near(t, "lock median", lock.MedianSeconds, 9.5, 1e-9)
	near(t, "lock min", lock.MinSeconds, 8, 1e-9)
	near(t, "lock max", lock.MaxSeconds, 11, 1e-9)
	if l.Handoff[4].Known != 7 || l.Handoff[4].Unknown != 0 {
		t.Errorf("start-up: %+v", l.Handoff[4])
	}
	md := string(Markdown(r))
	for _, want := range []string{"## The hand-off, by part", "| together | hand-offs | whole gap | Argo releases the lock and starts the next step |", "| 8 | 7 |", "9.5 s (8.0 s–11 s)", "1 s resolution", "before the next job's pod existed"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	svg := HandoffChart(r)
	wellFormed(t, svg)
	for _, p := range HandoffParts {
		if !bytes.Contains(svg, []byte(p.Colour)) {
			t.Errorf("hand-off chart lacks part %s", p.ID)
		}
	}
	if !bytes.Contains(svg, []byte("1 s resolution")) || !bytes.Contains(svg, []byte("8 together")) {
		t.Errorf("hand-off chart: %s", svg)
	}

	r = &Report{Batches: []Batch{handoffBatch(false)}}
	Summarize(r)
	if p := r.Levels[0].Handoff[4]; p.MedianSeconds != nil || p.Unknown != 7 {
		t.Errorf("start-up without logs: %+v", p)
	}
	if md := string(Markdown(r)); !strings.Contains(md, "| unknown |") || !strings.Contains(md, "start-up is unknown") {
		t.Errorf("markdown without logs:\n%s", md)
	}
	if svg := HandoffChart(r); !bytes.Contains(svg, []byte("start-up unknown (no job log)")) {
		t.Errorf("hand-off chart without logs: %s", svg)
	}
	wellFormed(t, HandoffChart(&Report{}))
}

func wellFormed(t *testing.T, svg []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		if _, err := dec.Token(); err != nil {
			if err == io.EOF {
				return
			}
			t.Fatalf("not XML: %v\n%s", err, svg)
		}
	}
}
