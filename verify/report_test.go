package verify

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/verify/testjob"
)

var t0 = time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// jb is a job submitted at sub that started at start and ended at end
// (seconds from t0; start < 0 means never), admitted by the queue a second
// before it started.
func jb(i int, sub, start, end float64) Job {
	j := Job{Name: fmt.Sprintf("job-%d", i), Index: i, Submitted: at(sub), Outcome: Succeeded}
	if start >= 0 {
		j.PodCreated = at(start - 2)
		j.Admitted = at(start - 2)
		j.ContainerStarted = at(start)
	} else {
		j.Outcome = Waiting
	}
	if end >= 0 {
		j.Ended = at(end)
		j.Released = at(end)
	}
	return j
}

func pred(n int, why string) Prediction {
	p := Prediction{Template: "gpu-step-no-cache", Priority: "batch", State: map[string]string{"qwen2-5-7b": "down"}, Admitted: n, QuotaAdmits: 4, BoundBy: "quota", Binding: []string{"nvidia.com/gpu", "memory"}}
	if why == "lock" {
		p.BoundBy, p.Lock, p.LockSize = "lock", "main", n
	}
	return p
}

var down = State{Services: map[string]string{"qwen2-5-7b": "down"}}
var up = State{Services: map[string]string{"qwen2-5-7b": "up"}}

func batch(level, index int, p Prediction, jobs ...Job) Batch {
	until := t0
	for _, j := range jobs {
		if j.Ended.After(until) {
			until = j.Ended
		}
	}
	return Batch{Kind: LevelBatch, Level: level, Index: index, Submitted: t0, Until: until, State: down, Predicted: p, Jobs: jobs}
}

func near(t *testing.T, what string, got *float64, want, tol float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s = nil, want %.3f", what, want)
		return
	}
	if math.Abs(*got-want) > tol {
		t.Errorf("%s = %.4f, want %.4f ± %g", what, *got, want, tol)
	}
}

func ids(fs []finding.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Rule)
	}
	return out
}

// oneAtATime is the first write-up's measurement: eight 5-second jobs
// submitted together behind a lock of one, 16 to 19 s between one ending
// and the next starting; the batch drained in 2.7 minutes.
func oneAtATime() Batch {
	gaps := []float64{16, 17, 16, 19, 16, 18, 16}
	var jobs []Job
	start := 10.0
	for i := 1; i <= 8; i++ {
		jobs = append(jobs, jb(i, 0, start, start+5))
		if i < 8 {
			start += 5 + gaps[i-1]
		}
	}
	return batch(8, 1, pred(1, "lock"), jobs...)
}

func TestOneAtATime(t *testing.T) {
	r := &Report{Batches: []Batch{oneAtATime()}}
	Summarize(r)
	if !r.OK() {
		t.Fatalf("findings: %v", r.Findings)
	}
	l := r.Levels[0]
	// 8 jobs over 10 + 8×5 + 118 s of gaps = 168 s.
	near(t, "rate", l.RatePerMin, 8/(168.0/60), 0.001)
	near(t, "median gap", r.MedianGapSeconds, 16, 0)
	if l.MaxRunning != 1 || l.MaxAdmitted != 1 || r.MaxRunning != 1 {
		t.Errorf("max running/admitted = %d/%d, want 1/1", l.MaxRunning, l.MaxAdmitted)
	}
	if len(l.Gaps) != 7 || l.Gaps[0].Job != "job-2" || l.Gaps[0].After != "job-1" || l.Gaps[3].Seconds != 19 {
		t.Errorf("gaps = %+v", l.Gaps)
	}
	if r.LoneRatePerMin != nil || l.ExpectedPerMin != nil {
		t.Error("no level 1, so no lone rate")
	}
}

// TestWriteupRate: eight jobs, 16 s gaps, 5 s each, drained in 162 s —
// the 2.96 jobs/min of the write-up.
func TestWriteupRate(t *testing.T) {
	var jobs []Job
	for i := 0; i < 8; i++ {
		s := 10 + float64(i)*21
		jobs = append(jobs, jb(i+1, 0, s, s+5))
	}
	b := batch(8, 1, pred(1, "lock"), jobs...)
	rate, ok := BatchRate(b)
	if !ok || math.Abs(rate-2.963) > 0.001 {
		t.Fatalf("rate = %.4f, want 2.963", rate)
	}
	gs := Gaps(b)
	if len(gs) != 7 {
		t.Fatalf("%d gaps", len(gs))
	}
	for _, g := range gs {
		if g.Seconds != 16 {
			t.Errorf("gap %+v, want 16 s", g)
		}
	}
}

// TestLevels: one to four jobs together with the lock at four, plus five
// (two rounds), three batches each for 1 and 4, the write-up's shape.
func TestLevels(t *testing.T) {
	p := pred(4, "quota")
	var bs []Batch
	// Lone job: 65 s run, 10 s to start: 1 job / 75 s = 0.8 jobs/min;
	// second batch 1/70 s, third 1/80 s.
	for i, end := range []float64{75, 70, 80} {
		bs = append(bs, batch(1, i+1, p, jb(1, 0, 10, end)))
	}
	// Four together: start 10..13, 65 s each; last end 78 → 4/78 s.
	for i := 1; i <= 3; i++ {
		bs = append(bs, batch(4, i, p, jb(1, 0, 10, 75), jb(2, 0, 11, 76), jb(3, 0, 12, 77), jb(4, 0, 13, 78)))
	}
	// Five: four run, the fifth starts 16 s after the first end (75).
	bs = append(bs, batch(5, 1, p, jb(1, 0, 10, 75), jb(2, 0, 11, 76), jb(3, 0, 12, 77), jb(4, 0, 13, 78), jb(5, 0, 91, 156)))
	r := &Report{Batches: bs}
	Summarize(r)
	if !r.OK() {
		t.Fatalf("findings: %v", r.Findings)
	}
	if len(r.Levels) != 3 {
		t.Fatalf("levels: %+v", r.Levels)
	}
	lone := (60/75.0 + 60/70.0 + 60/80.0) / 3
	near(t, "lone rate", r.LoneRatePerMin, lone, 1e-9)
	l1, l4, l5 := r.Levels[0], r.Levels[1], r.Levels[2]
	near(t, "level 1 min", l1.RateMin, 0.75, 1e-9)
	near(t, "level 1 max", l1.RateMax, 60/70.0, 1e-9)
	near(t, "level 4 rate", l4.RatePerMin, 4*60/78.0, 1e-9)
	near(t, "level 4 expected", l4.ExpectedPerMin, 4*lone, 1e-9)
	near(t, "level 4 ratio", l4.Ratio, 4*60/78.0/lone, 1e-9)
	if l4.MaxRunning != 4 || l4.Predicted != 4 || l4.MedianGapSeconds != nil {
		t.Errorf("level 4: %+v", l4)
	}
	if l5.MaxRunning != 4 || l5.Predicted != 4 {
		t.Errorf("level 5: running %d predicted %d", l5.MaxRunning, l5.Predicted)
	}
	near(t, "level 5 rate", l5.RatePerMin, 5*60/156.0, 1e-9)
	// The fifth took the place the first end freed: 91 − 75.
	if len(l5.Gaps) != 1 || l5.Gaps[0].Job != "job-5" || l5.Gaps[0].After != "job-1" || l5.Gaps[0].Seconds != 16 {
		t.Errorf("level 5 gaps: %+v", l5.Gaps)
	}
	near(t, "median gap", r.MedianGapSeconds, 16, 0)
}

func TestMoreThanPredicted(t *testing.T) {
	b := batch(5, 1, pred(4, "lock"), jb(1, 0, 10, 75), jb(2, 0, 11, 76), jb(3, 0, 12, 77), jb(4, 0, 13, 78), jb(5, 0, 14, 79))
	fs := Compare(b)
	got := strings.Join(ids(fs), ",")
	if got != "more-at-once,more-at-once,did-not-wait" {
		t.Fatalf("findings %s: %v", got, fs)
	}
	d := fs[2]
	if d.Object != "Workflow/job-5" || !strings.Contains(d.Message, "while 4 others were running") || !strings.Contains(d.Message, "the lock main (4)") {
		t.Errorf("did-not-wait: %+v", d)
	}
	if !strings.Contains(fs[0].Message, "5 ran at once with qwen2-5-7b down, predicted at most 4") {
		t.Errorf("more-at-once: %s", fs[0].Message)
	}
}

func TestFewerThanPredicted(t *testing.T) {
	b := batch(4, 2, pred(4, "quota"), jb(1, 0, 10, 75), jb(2, 0, 91, 156), jb(3, 0, 172, 237), jb(4, 0, 253, 318))
	fs := Compare(b)
	if len(fs) != 1 || fs[0].Rule != CheckFewerAtOnce || !strings.Contains(fs[0].Message, "level 4, batch 2: at most 1 of 4 ran at once with qwen2-5-7b down, predicted 4") {
		t.Fatalf("%v", fs)
	}
}

// TestLockOfOne: strictly one at a time agrees with a prediction of one;
// a one-second overlap in API stamps does not, and a tie does not count.
func TestLockOfOne(t *testing.T) {
	ok := batch(3, 1, pred(1, "lock"), jb(1, 0, 5, 15), jb(2, 0, 15, 25), jb(3, 0, 31, 41))
	for i := range ok.Jobs {
		ok.Jobs[i].Admitted = ok.Jobs[i].ContainerStarted
	}
	if fs := Compare(ok); len(fs) != 0 {
		t.Fatalf("a hand-off in the same second is no overlap: %v", fs)
	}
	// A precise end (verify saw the pod gone at +15.02) against a
	// truncated admission of the next (+15, really +15.4) is a hand-off.
	mixed := batch(2, 1, pred(1, "lock"), jb(1, 0, 5, 15.02), jb(2, 0, 16, 25))
	mixed.Jobs[0].Released = time.Time{}
	mixed.Jobs[1].Admitted = at(15)
	if fs := Compare(mixed); len(fs) != 0 {
		t.Fatalf("mixed precision: %v", fs)
	}
	bad := batch(3, 1, pred(1, "lock"), jb(1, 0, 5, 15), jb(2, 0, 14, 25), jb(3, 0, 31, 41))
	if got := strings.Join(ids(Compare(bad)), ","); got != "more-at-once,more-at-once,did-not-wait" {
		t.Fatalf("overlap: %s", got)
	}
}

func TestStarved(t *testing.T) {
	p := pred(0, "quota")
	p.QuotaAdmits, p.Binding = 0, []string{"gpupolicy.dev/gpu-memory"}
	p.Margin = map[string]string{"gpupolicy.dev/gpu-memory": "404Mi"}
	p.Explain = []string{"batch jobs get 0 with qwen2-5-7b up"}
	b := batch(2, 1, p, jb(1, 0, -1, -1), jb(2, 0, -1, -1))
	b.State, b.Until, b.StarveWatchSeconds = up, at(60), 60
	r := &Report{Priority: "batch", Batches: []Batch{b}}
	Summarize(r)
	if !r.OK() {
		t.Fatalf("findings: %v", r.Findings)
	}
	if len(r.Notes) != 2 || r.Notes[1] != "explain predicted it: batch jobs get 0 with qwen2-5-7b up" || !strings.Contains(r.Notes[0], "as predicted with qwen2-5-7b up, no batch job was admitted (quota: gpupolicy.dev/gpu-memory (404Mi left)): 2 waited 60 s") {
		t.Errorf("notes: %v", r.Notes)
	}
	if !r.Levels[0].Starved || r.Levels[0].RatePerMin != nil {
		t.Errorf("level: %+v", r.Levels[0])
	}
	b.Jobs[1] = jb(2, 0, 40, -1)
	b.Jobs[1].Outcome = Unfinished
	fs := Compare(b)
	if len(fs) != 1 || fs[0].Rule != CheckStarvedAdmitted || !strings.Contains(fs[0].Message, "job-2 was admitted 38 s after submission with qwen2-5-7b up, where the policy admits no batch job (quota: gpupolicy.dev/gpu-memory (404Mi left))") {
		t.Fatalf("%v", fs)
	}
}

func TestStateChangedNotCompared(t *testing.T) {
	b := batch(5, 1, pred(4, "lock"), jb(1, 0, 10, 75), jb(2, 0, 11, 76), jb(3, 0, 12, 77), jb(4, 0, 13, 78), jb(5, 0, 14, 79))
	b.StateAfter = &up
	r := &Report{Batches: []Batch{b}}
	Summarize(r)
	if !r.OK() || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "changed during the batch (qwen2-5-7b down → qwen2-5-7b up)") {
		t.Fatalf("findings %v notes %v", r.Findings, r.Notes)
	}
}

func TestFailuresAndUnfinished(t *testing.T) {
	failed := jb(1, 0, 10, 20)
	failed.Outcome, failed.Message = Failed, "Error (exit code 1)"
	bad := jb(2, 0, 10, 20)
	bad.Result = &testjob.Result{Device: "cuda", Start: 1, End: 2, MatmulRelErr: 2e-3, LMRelErr: 1e-6, OK: false}
	waiting := jb(3, 0, -1, -1)
	waiting.Message = "Waiting for experiments/ConfigMap/gpu-semaphores/main lock. Lock status: 0/4"
	running := jb(4, 0, 12, -1)
	running.Outcome = Unfinished
	b := batch(4, 1, pred(4, "quota"), failed, bad, waiting, running)
	b.Until = at(600)
	got := strings.Join(ids(Compare(b)), ",")
	if got != "job-failed,job-check-failed,unfinished,unfinished" {
		t.Fatalf("%s: %v", got, Compare(b))
	}
}

func TestCancel(t *testing.T) {
	// One of three running is cancelled at +30 s and closes 5.3 s later;
	// the fourth, waiting, starts 15.7 s after that.
	c := jb(1, 0, 10, 35.3)
	c.Outcome = Cancelled
	b := batch(4, 1, pred(3, "quota"), c, jb(2, 0, 11, 76), jb(3, 0, 12, 77), jb(4, 0, 51, 116))
	b.Kind = CancelBatch
	b.Cancel = &Cancel{Job: "job-1", Strategy: "Terminate", Requested: at(30), Closed: at(35.3), ClosedBy: "argo", Next: "job-4", NextStarted: at(51)}
	r := &Report{Batches: []Batch{b}}
	Summarize(r)
	if !r.OK() {
		t.Fatalf("findings: %v", r.Findings)
	}
	cs := r.Cancel
	if cs == nil || cs.Others != 3 || cs.OthersSucceeded != 3 {
		t.Fatalf("cancel: %+v", cs)
	}
	near(t, "close", cs.CloseSeconds, 5.3, 1e-9)
	near(t, "hand-off", cs.HandoffSeconds, 15.7, 1e-9)
	if len(r.Levels) != 0 {
		t.Error("the cancel batch is not a level")
	}
	s := cancelSentence(cs)
	if !strings.Contains(s, "it closed in 5.3 s, and job-4, the job behind it, started 16 s later; 3 of the 3 other job(s) succeeded") {
		t.Errorf("sentence: %s", s)
	}
	b.Cancel.Closed = time.Time{}
	if got := ids(Compare(b)); len(got) != 1 || got[0] != CheckCancel {
		t.Errorf("unclosed cancel: %v", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{19, 16, 17}, 17}, {[]float64{16, 19, 16, 18}, 17}} {
		got, ok := Median(tc.in)
		if !ok || got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if _, ok := Median(nil); ok {
		t.Error("median of nothing")
	}
}

func sampleReport() *Report {
	l5 := batch(5, 1, pred(4, "lock"), jb(1, 0, 10, 75), jb(2, 0, 11, 76), jb(3, 0, 12, 77), jb(4, 0, 13, 78), jb(5, 0, 91, 156))
	l1 := batch(1, 1, pred(4, "lock"), jb(1, 0, 10, 75))
	c := jb(1, 0, 10, 35)
	c.Outcome = Cancelled
	cb := batch(5, 1, pred(4, "lock"), c, jb(2, 0, 11, 76), jb(3, 0, 12, 77), jb(4, 0, 13, 78), jb(5, 0, 51, 116))
	cb.Kind = CancelBatch
	cb.Cancel = &Cancel{Job: "job-1", Strategy: "Terminate", Requested: at(30), Closed: at(35), ClosedBy: "argo", Next: "job-5", NextStarted: at(51)}
	live := 4
	r := &Report{RunID: "abc123", Environment: "local", Policy: "lab", Namespace: "experiments", Template: "gpu-step-no-cache",
		Priority: "batch", HoldSeconds: 60, Lock: &LockInfo{Name: "main", Size: 4, Live: &live}, Started: t0, Finished: at(400),
		Batches:   []Batch{l1, l5, cb},
		GPUMemory: GPUMemory{Reason: "NVML unavailable (ERROR_LIBRARY_NOT_FOUND)"},
		Cleanup:   &Cleanup{Deleted: []string{"Workflow experiments/x"}}}
	Summarize(r)
	return r
}

func TestTimelineSVG(t *testing.T) {
	r := sampleReport()
	svg := Timeline(r)
	if !bytes.Equal(svg, Timeline(r)) {
		t.Fatal("timeline not deterministic")
	}
	// Well-formed XML, one waiting and one running bar per started job,
	// a legend and an axis in seconds.
	dec := xml.NewDecoder(bytes.NewReader(svg))
	waiting, running, cancels := 0, 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("not XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Local == "fill" && se.Name.Local == "rect" {
					switch a.Value {
					case colourWaiting:
						waiting++
					case colourRunning:
						running++
					}
				}
				if a.Name.Local == "stroke" && a.Value == colourCancel && se.Name.Local == "line" {
					cancels++
				}
			}
		}
	}
	// 11 jobs, each waited then ran; the legend adds one swatch of each.
	if waiting != 12 || running != 12 || cancels != 2 {
		t.Errorf("waiting %d running %d cancel marks %d", waiting, running, cancels)
	}
	for _, want := range []string{"submitted, waiting", "running, from the job", "the cancel request", "seconds since the batch was submitted", "level 5, batch 1", "cancel batch (5 jobs)", "65 s", "25 s cancelled"} {
		if !bytes.Contains(svg, []byte(esc(want))) {
			t.Errorf("timeline lacks %q", want)
		}
	}
	golden(t, "timeline.svg", svg)
}

func TestMarkdownAndJSON(t *testing.T) {
	r := sampleReport()
	md := string(Markdown(r))
	for _, want := range []string{
		"# gpupolicy verify: local — PASS",
		"**The cluster admitted what the policy predicts.**",
		"| 5 | 1 | 5/5 | 1.92 | 1.92–1.92 | 4.00 | 2.4× | 4 | 4 | 16 s |",
		"Service state: qwen2-5-7b down; predicted 4 at once (the lock main (4)).",
		"One job alone: 0.80 jobs/min. Median gap between one job's end and the next one's start: 16 s (1 hand-off(s)).",
		"Cancelled job-1 mid-run (cancel batch (5 jobs), spec.shutdown=Terminate): it closed in 5.0 s, and job-5, the job behind it, started 16 s later; 4 of the 4 other job(s) succeeded.",
		"GPU memory not sampled: NVML unavailable (ERROR_LIBRARY_NOT_FOUND).",
		"| level 5, batch 1 | 5 | `job-5` | 89.0 | 89.0 | 91.0 (container) | — | 156.0 | succeeded |",
		"Lock main: 4 in the policy, 4 on the cluster.",
		"nothing left behind",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	golden(t, "report.md", []byte(md))
	js, err := JSON(r)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"runId", "levels", "loneRatePerMin", "medianGapSeconds", "maxRunning", "cancel", "gpuMemory", "findings", "batches"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	var rt Report
	if err := json.Unmarshal(js, &rt); err != nil || len(rt.Batches) != 3 || !rt.Batches[1].Jobs[4].ContainerStarted.Equal(at(91)) {
		t.Errorf("JSON does not round-trip: %v", err)
	}

	txt := string(Text(r))
	if !strings.Contains(txt, "verify: the cluster admitted what the policy predicts") {
		t.Errorf("text: %s", txt)
	}
	r.Batches[1].Jobs[4] = jb(5, 0, 14, 79)
	Summarize(r)
	if r.OK() || !strings.Contains(string(Markdown(r)), "— FAIL") || !strings.Contains(string(Text(r)), "verify: did-not-wait: level 5, batch 1: job job-5") {
		t.Errorf("a disagreement does not show: %v", r.Findings)
	}
}

func TestWriteDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	r := sampleReport()
	if err := WriteDir(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "report.json", FileTimeline, FileRates, FileHandoff} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 5 {
		t.Errorf("stray files: %v", entries)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, f := range []string{FileTimeline, FileRates, FileHandoff} {
		if !bytes.Contains(md, []byte("]("+f+")")) {
			t.Errorf("report.md does not embed %s", f)
		}
	}
	if false {
		t.Errorf("stray files: %v", entries)
	}
}

var update = os.Getenv("GPUPOLICY_UPDATE_GOLDEN") != ""

// golden compares got with testdata/NAME (GPUPOLICY_UPDATE_GOLDEN=1
// rewrites it).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with GPUPOLICY_UPDATE_GOLDEN=1 to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (GPUPOLICY_UPDATE_GOLDEN=1 to update):\n%s", name, got)
	}
}
