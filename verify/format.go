package verify

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/atomicfile"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/output"
)

// Formats are the formats verify prints.
var Formats = output.All

// Write prints the report in a format (output.Writer): text, json, yaml (the
// same document) or markdown.
func (r *Report) Write(w io.Writer, f output.Format) error {
	bytesOf := func(format func(*Report) []byte) func(io.Writer) error {
		return func(w io.Writer) error { _, err := w.Write(format(r)); return err }
	}
	return output.Write(w, f, r, bytesOf(Text), bytesOf(Markdown))
}

// JSON is the report as indented JSON (times RFC 3339, durations in seconds
// where the field name says so).
func JSON(r *Report) ([]byte, error) {
	var b bytes.Buffer
	err := output.WriteJSON(&b, r)
	return b.Bytes(), err
}

// Chart files WriteDir writes beside report.md, which links them.
const (
	FileTimeline = "timeline.svg"
	FileRates    = "rates.svg"
	FileHandoff  = "handoff.svg"
)

// Markdown is the report as a pull-request comment or scheduled report. The
// charts are files (WriteDir); this text names them but does not embed
// them, since it may be printed where they are not.
func Markdown(r *Report) []byte { return markdown(r, false) }

// markdown embeds the charts as images linked relative to the report when
// charts is set (report.md in WriteDir's folder).
func markdown(r *Report, charts bool) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s", heading("", r.Environment, r.OK()))
	w("%s\n\n", intro(r))
	verdictMarkdown(&b, r.Findings, "The cluster admitted what the policy predicts.", "the policy")

	if len(r.Levels) > 0 {
		w("## Jobs completed per minute, by how many were submitted together\n\n")
		w("| together | batches | completed | jobs/min | range | lone × n | × lone | ran at once | predicted | median gap |\n")
		w("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, l := range r.Levels {
			w("| %d | %d | %d/%d | %s | %s | %s | %s | %d | %d | %s |\n",
				l.Level, l.Batches, l.Completed, l.Jobs, rate(l.RatePerMin), rng(l.RateMin, l.RateMax),
				rate(l.ExpectedPerMin), ratio(l.Ratio), l.MaxRunning, l.Predicted, optSecs(l.MedianGapSeconds))
		}
		w("\n")
		w("%s\n\n", headline(r))
		if charts {
			w("![Jobs completed per minute, by how many were submitted together](%s)\n\n", FileRates)
		}
	}

	if len(r.Handoff) > 0 {
		w("## The hand-off, by part\n\n")
		w("The gap from one job's end to the start of the job that took its place, split at the next job's stamps: each part's median over the level's hand-offs, with its range. %s\n\n", handoffCaption())
		w("%s", handoffHeader("rrr", "together", "hand-offs", "whole gap"))
		for _, row := range handoffRows(r) {
			w("| %s | %d | %s |", strings.TrimSuffix(row.Label, " together"), row.Handoffs, medRange(row.Median, row.Low, row.High))
			for _, p := range row.Parts {
				w(" %s |", partCell(p))
			}
			w("\n")
		}
		w("\n%s\n\n", handoffSentence(r))
		if charts {
			w("![The gap between one job ending and the next starting, by part](%s)\n\n", FileHandoff)
		}
	}
	if charts {
		w("![When each job waited and ran](%s)\n\n", FileTimeline)
	} else {
		w("Charts: `gpupolicy verify --report DIR` writes %s, %s and %s beside report.md.\n\n", FileRates, FileHandoff, FileTimeline)
	}

	if c := r.Cancel; c != nil {
		w("## Cancel\n\n%s\n\n", cancelSentence(c))
	}
	if f := r.Faults; f != nil {
		w("## Faults beside others\n\n")
		for _, s := range faultSentences(f) {
			w("%s\n\n", s)
		}
	}
	if x := r.Exclusive; x != nil {
		w("## Exclusive job\n\n")
		for _, s := range x.Sentences() {
			w("%s\n\n", s)
		}
	}

	w("## GPU memory\n\n%s\n\n", r.GPUMemory.Sentence())

	if len(r.Notes) > 0 {
		w("## Notes\n\n")
		for _, n := range r.Notes {
			w("- %s\n", n)
		}
		w("\n")
	}

	w("## Jobs\n\n")
	w("Seconds from the batch's submission; pod and queue stamps come from the API server at one-second resolution (an early one reads 0.0), \"started\" is the job's own start stamp when its log was readable, else its container's start.\n\n")
	w("| batch | job | workflow | pod created | admitted | started | work ended | ended | outcome |\n")
	w("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, bt := range r.Batches {
		for _, j := range bt.Jobs {
			started := relCell(j.Started(), bt.Submitted)
			if src := j.StartSource(); src != "" {
				started += " (" + src + ")"
			}
			w("| %s | %d | `%s` | %s | %s | %s | %s | %s | %s |\n", bt.Label(), j.Index, j.Name,
				relCell(j.PodCreated, bt.Submitted), relCell(j.Admitted, bt.Submitted), started,
				relCell(j.WorkEnded, bt.Submitted), relCell(j.Ended, bt.Submitted), outcomeCell(j))
		}
	}
	w("\n")
	if r.Cleanup != nil {
		w("## Cleanup\n\n%s\n", r.Cleanup.Sentence(r.RunID))
	}
	return b.Bytes()
}

// handoffHeader is a markdown hand-off table's header: the lead columns,
// aligned as align says (r or l, one letter each), then one right-aligned
// column per part.
func handoffHeader(align string, lead ...string) string {
	var head, rule strings.Builder
	head.WriteString("|")
	rule.WriteString("|")
	for i, c := range lead {
		fmt.Fprintf(&head, " %s |", c)
		if align[i] == 'l' {
			rule.WriteString(" --- |")
		} else {
			rule.WriteString(" ---: |")
		}
	}
	for _, p := range HandoffParts {
		fmt.Fprintf(&head, " %s |", p.Label)
		rule.WriteString(" ---: |")
	}
	return head.String() + "\n" + rule.String() + "\n"
}

// heading is a markdown report's title: "# gpupolicy verify[what]: ENV —
// PASS" (or FAIL).
func heading(what, env string, ok bool) string {
	v := "PASS"
	if !ok {
		v = "FAIL"
	}
	if env == "" {
		env = "(no environment)"
	}
	return fmt.Sprintf("# gpupolicy verify%s: %s — %s\n\n", what, env, v)
}

// Text is the report for a terminal.
func Text(r *Report) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s\n", intro(r))
	if len(r.Levels) > 0 {
		w("\n%-9s %7s %9s %9s %13s %9s %7s %7s %9s %10s\n", "together", "batches", "completed", "jobs/min", "range", "lone × n", "× lone", "at once", "predicted", "median gap")
		for _, l := range r.Levels {
			w("%-9d %7d %9s %9s %13s %9s %7s %7d %9d %10s\n", l.Level, l.Batches, fmt.Sprintf("%d/%d", l.Completed, l.Jobs),
				rate(l.RatePerMin), rng(l.RateMin, l.RateMax), rate(l.ExpectedPerMin), ratio(l.Ratio), l.MaxRunning, l.Predicted, optSecs(l.MedianGapSeconds))
		}
		w("\n%s\n", headline(r))
	}
	if len(r.Handoff) > 0 {
		w("\nThe hand-off, by part (median, range):\n")
		for _, row := range handoffRows(r) {
			w("  %s, %d hand-off(s): gap %s", row.Label, row.Handoffs, medRange(row.Median, row.Low, row.High))
			for _, p := range row.Parts {
				w("; %s %s", p.Label, partCell(p))
			}
			w("\n")
		}
		w("%s\n", handoffSentence(r))
	}
	if c := r.Cancel; c != nil {
		w("\n%s\n", cancelSentence(c))
	}
	if f := r.Faults; f != nil {
		w("\nFaults beside others:\n")
		for _, s := range faultSentences(f) {
			w("  %s\n", s)
		}
	}
	if x := r.Exclusive; x != nil {
		w("\nExclusive job:\n")
		for _, s := range x.Sentences() {
			w("  %s\n", s)
		}
	}
	w("\n%s\n", r.GPUMemory.Sentence())
	for _, n := range r.Notes {
		w("note: %s\n", n)
	}
	if r.Cleanup != nil {
		w("%s\n", r.Cleanup.Sentence(r.RunID))
	}
	verdict(&b, r.Findings, "the cluster admitted what the policy predicts", "the policy")
	return b.Bytes()
}

// verdictMarkdown is the markdown verdict: the ok line in bold, or the
// count of the disagreements with what and each of them.
func verdictMarkdown(b *bytes.Buffer, fs []finding.Finding, ok, what string) {
	if len(fs) == 0 {
		fmt.Fprintf(b, "**%s**\n\n", ok)
		return
	}
	fmt.Fprintf(b, "**%d disagreement(s) with %s:**\n\n", len(fs), what)
	for _, f := range fs {
		fmt.Fprintf(b, "- `%s` %s\n", f.Rule, f.Message)
	}
	b.WriteString("\n")
}

// verdict ends a text report: the ok line, or each finding and their
// count ("N disagreement(s) with WHAT").
func verdict(b *bytes.Buffer, fs []finding.Finding, ok, what string) {
	if len(fs) == 0 {
		fmt.Fprintf(b, "\nverify: %s\n", ok)
		return
	}
	b.WriteString("\n")
	for _, f := range fs {
		fmt.Fprintf(b, "verify: %s\n", f)
	}
	fmt.Fprintf(b, "verify: %d disagreement(s) with %s\n", len(fs), what)
}

func intro(r *Report) string {
	jobs := 0
	for _, b := range r.Batches {
		jobs += len(b.Jobs)
	}
	s := fmt.Sprintf("Run %s", r.RunID)
	if r.Environment != "" {
		s += " on environment " + r.Environment
	}
	if r.Policy != "" {
		s += " (policy " + r.Policy + ")"
	}
	through := fmt.Sprintf("through %s/%s at %s priority", r.Namespace, r.Template, r.Priority)
	if x := r.Exclusive; x != nil {
		jobs--
		through += fmt.Sprintf(", and 1 through the exclusive %s/%s at %s priority", r.Namespace, x.Template, x.Priority)
	}
	s += fmt.Sprintf(": %d job(s) in %d batch(es) %s, each holding the GPU %s after its work",
		jobs, len(r.Batches), through, fmtSecs(r.HoldSeconds))
	if !r.Started.IsZero() && !r.Finished.IsZero() {
		s += fmt.Sprintf("; %s to %s UTC", r.Started.UTC().Format("2006-01-02 15:04:05"), r.Finished.UTC().Format("15:04:05"))
	}
	s += "."
	if r.Lock != nil {
		s += fmt.Sprintf(" Lock %s: %d in the policy", r.Lock.Name, r.Lock.Size)
		if r.Lock.Live != nil {
			s += fmt.Sprintf(", %d on the cluster", *r.Lock.Live)
		}
		s += "."
	}
	if len(r.Batches) > 0 {
		b := r.Batches[0]
		s += fmt.Sprintf(" Service state: %s; predicted %d at once (%s).", b.State.Label(), b.Predicted.Admitted, b.Predicted.Why())
	}
	return s
}

func headline(r *Report) string {
	var parts []string
	if r.LoneRatePerMin != nil {
		parts = append(parts, fmt.Sprintf("One job alone: %s jobs/min.", rate(r.LoneRatePerMin)))
	}
	n := 0
	for _, l := range r.Levels {
		n += len(l.Gaps)
	}
	if r.MedianGapSeconds != nil {
		parts = append(parts, fmt.Sprintf("Median gap between one job's end and the next one's start: %s (%d hand-off(s)).", fmtSecs(*r.MedianGapSeconds), n))
	} else {
		parts = append(parts, "No job waited for another to end, so there is no hand-off gap.")
	}
	parts = append(parts, fmt.Sprintf("Most running at once: %d.", r.MaxRunning))
	return strings.Join(parts, " ")
}

func medRange(m, lo, hi float64) string {
	if lo == hi {
		return fmtSecs(m)
	}
	return fmtSecs(m) + " (" + fmtSecs(lo) + "–" + fmtSecs(hi) + ")"
}

func partCell(p PartSummary) string {
	if p.MedianSeconds == nil {
		return "unknown"
	}
	s := medRange(*p.MedianSeconds, *p.MinSeconds, *p.MaxSeconds)
	if p.Unknown > 0 {
		s += fmt.Sprintf(", unknown in %d", p.Unknown)
	}
	return s
}

// handoffSentence says, over every hand-off of the run, how much of the
// median gap passed before the next job's pod existed, as the write-up
// did.
func handoffSentence(r *Report) string {
	if len(r.Handoff) == 0 {
		return ""
	}
	pre, n := 0.0, 0
	for _, p := range r.Handoff[:2] {
		if p.MedianSeconds != nil {
			pre += *p.MedianSeconds
		}
		n = max(n, p.Known)
	}
	s := fmt.Sprintf("Over all %d hand-off(s), %s of the median passed before the next job's pod existed (Argo releasing the lock and starting the waiting step, and creating its pod)", n, fmtSecs(pre))
	if p := r.Handoff[4]; p.MedianSeconds == nil {
		s += "; the job's own start-up is unknown, since no job log was readable, so the gap ends at the container's start"
	}
	return s + fmt.Sprintf(". Stamps: %s s resolution.", trimFloat(r.HandoffResolutionSeconds))
}

func cancelSentence(c *CancelSummary) string {
	s := fmt.Sprintf("Cancelled %s mid-run (%s, spec.shutdown=%s)", c.Job, c.Batch, c.Strategy)
	if c.CloseSeconds != nil {
		s += fmt.Sprintf(": it closed in %s", fmtSecs(*c.CloseSeconds))
		if c.ClosedBy != "" && c.ClosedBy != "argo" {
			s += " (by " + c.ClosedBy + ")"
		}
		if !c.LockReleased.IsZero() && c.LockReleased.Before(c.Closed) {
			s += fmt.Sprintf("; Argo released its lock %s after the request, %s before its pod stopped (Kueue frees quota only then)",
				fmtSecs(max(0, secs(c.LockReleased.Sub(c.Requested)))), fmtSecs(secs(c.Closed.Sub(c.LockReleased))))
		}
		if c.HandoffSeconds != nil {
			s += fmt.Sprintf(", and %s, the job behind it, started %s later", c.Next, fmtSecs(*c.HandoffSeconds))
		} else {
			s += ", and no job started in its place"
		}
	} else {
		s += ": it had not closed when verify stopped watching"
	}
	s += fmt.Sprintf("; %d of the %d other job(s) succeeded.", c.OthersSucceeded, c.Others)
	return s
}

// Sentence says what cleanup did.
func (c *Cleanup) Sentence(runID string) string {
	if len(c.Left) == 0 {
		return fmt.Sprintf("Cleanup: deleted %d object(s) labelled %s=%s; nothing left behind.", len(c.Deleted), LabelRun, runID)
	}
	return fmt.Sprintf("Cleanup: deleted %d object(s); still present: %s.", len(c.Deleted), strings.Join(c.Left, ", "))
}

func rate(v *float64) string {
	if v == nil {
		return "—"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}

func rng(lo, hi *float64) string {
	if lo == nil || hi == nil {
		return "—"
	}
	return rate(lo) + "–" + rate(hi)
}

func ratio(v *float64) string {
	if v == nil {
		return "—"
	}
	return strconv.FormatFloat(*v, 'f', 1, 64) + "×"
}

func optSecs(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmtSecs(*v)
}

// relCell is t in seconds after t0. API stamps are whole seconds and t0 is
// not, so a stamp can read up to a second early: it shows as 0.0.
func relCell(t, t0 time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return strconv.FormatFloat(max(0, t.Sub(t0).Seconds()), 'f', 1, 64)
}

func outcomeCell(j Job) string {
	s := string(j.Outcome)
	if j.Fault != "" {
		s += " (made to: " + j.Fault + ")"
	}
	if j.ExitCode != nil && *j.ExitCode != 0 {
		s += fmt.Sprintf(", exit code %d", *j.ExitCode)
	}
	if j.Result != nil {
		s += fmt.Sprintf(" (%s, matmul %.3f s, LM %.3f s)", j.Result.Device, j.Result.MatmulS, j.Result.LMS)
	}
	return s
}

// WriteDir writes report.md (linking the charts), report.json,
// timeline.svg, rates.svg and handoff.svg into dir,
// creating it; each file is written to a temporary name and renamed, so a
// failed run leaves the previous files intact.
func WriteDir(dir string, r *Report) error {
	js, err := JSON(r)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
	}{
		{"report.md", markdown(r, true)},
		{"report.json", js},
		{FileTimeline, Timeline(r)},
		{FileRates, RateChart(r)},
		{FileHandoff, HandoffChart(r)},
	}
	for _, f := range files {
		if err := atomicfile.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
