package verify

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/atomicfile"
	"github.com/gpupolicy/gpupolicy/internal/output"
)

// Write prints the side-by-side result in a format (output.Writer): text,
// json, yaml (the same document) or markdown.
func (s *SideBySide) Write(w io.Writer, f output.Format) error {
	bytesOf := func(format func(*SideBySide) []byte) func(io.Writer) error {
		return func(w io.Writer) error { _, err := w.Write(format(s)); return err }
	}
	return output.Write(w, f, s, bytesOf(SideBySideText), bytesOf(SideBySideMarkdown))
}

// SideBySideMarkdown is the side-by-side result as a pull-request comment;
// like Markdown, it names the charts but does not embed them.
func SideBySideMarkdown(s *SideBySide) []byte { return sideBySideMarkdown(s, nil) }

// sideBySideMarkdown embeds the charts, linked relative to the report, when
// dirs holds each policy's report folder (WriteSideBySideDir).
func sideBySideMarkdown(s *SideBySide, dirs []string) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s", heading(", two policies side by side", s.Environment, s.OK()))
	w("%s\n\n", sideBySideIntro(s))
	w("| | policy | from | template | lock | service state | predicted at once | run |\n| ---: | --- | --- | --- | --- | --- | ---: | --- |\n")
	for i, p := range s.Policies {
		tmpl, lock, state, predicted, run := "—", "—", "—", "—", "not run: "+p.Error
		if r := p.Report; r != nil {
			tmpl, lock, run = r.Template, lockCell(r.Lock), "`"+r.RunID+"`"
			if len(r.Batches) > 0 {
				state, predicted = r.Batches[0].State.Label(), itoa(r.Batches[0].Predicted.Admitted)
			}
			if p.Error != "" {
				run += " (stopped: " + p.Error + ")"
			}
		}
		w("| %d | **%s** | %s | %s | %s | %s | %s | %s |\n", i+1, p.Label, p.Source, tmpl, lock, state, predicted, run)
	}
	w("\n")
	verdictMarkdown(&b, s.Findings, "Both runs admitted what their policies predict.", "the policies")
	if len(s.Levels) > 0 {
		a, c := s.Policies[0].Label, s.Policies[1].Label
		w("## Jobs completed per minute, by how many were submitted together\n\n")
		w("| together | %s: jobs/min | %s: jobs/min | %s ÷ %s | %s: ran at once (predicted) | %s: ran at once (predicted) |\n", a, c, c, a, a, c)
		w("| ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, l := range s.Levels {
			pa, pc := l.Policies[0], l.Policies[1]
			w("| %d | %s | %s | %s | %d (%d) | %d (%d) |\n", l.Level, rateRange(pa), rateRange(pc), ratio2(l.RateRatio),
				pa.MaxRunning, pa.Predicted, pc.MaxRunning, pc.Predicted)
		}
		w("\n")
		if hasHandoffs(s) {
			w("## The hand-off, by part\n\n")
			w("From one job's end to the start of the job that took its place: each part's median over the level's hand-offs, with its range. %s\n\n", handoffCaption())
			w("%s", handoffHeader("rlrrr", "together", "policy", "hand-offs", "whole gap", "before the next pod"))
			for _, l := range s.Levels {
				for i, ls := range l.Policies {
					if ls.Handoffs == 0 {
						continue
					}
					w("| %d | %s | %d | %s | %s |", l.Level, s.Policies[i].Label, ls.Handoffs, optSecs(ls.MedianGapSeconds), optSecs(ls.BeforePodSeconds))
					for _, p := range ls.Handoff {
						w(" %s |", partCell(p))
					}
					w("\n")
				}
			}
			w("\n")
			if dirs != nil {
				w("![The hand-off by part under each policy](%s)\n\n", FileHandoff)
			}
		}
		if lines := oneAtATimeLines(s); len(lines) > 0 {
			w("## One at a time: where each batch's time went\n\n")
			w("A batch's rate is its jobs over the time from its submission to its last job's end; one at a time that time is the first job's start, every job's run (start to end) and the gaps between them, whatever the policy. Means over the level's batches.\n\n")
			w("| together | policy | first start | runs | gaps | batch | jobs/min |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n")
			for _, l := range s.Levels {
				for i, ls := range l.Policies {
					if t := ls.Time; t != nil {
						w("| %d | %s | %s | %s | %s | %s | %s |\n", l.Level, s.Policies[i].Label, fmtSecs(t.FirstStartSeconds), fmtSecs(t.RunsSeconds),
							fmtSecs(t.GapsSeconds), fmtSecs(t.TotalSeconds), rate(ls.RatePerMin))
					}
				}
			}
			w("\n")
			for _, line := range lines {
				w("%s\n\n", line)
			}
		}
	}
	w("## Each policy's run\n\n")
	for i, p := range s.Policies {
		if p.Report == nil {
			w("- **%s**: not run (%s)\n", p.Label, p.Error)
			continue
		}
		w("- **%s**: %s\n", p.Label, headline(p.Report))
		if dirs != nil {
			w("  [Its report](%s/report.md), with the jobs' stamps and its timeline.\n\n", dirs[i])
			w("  ![Jobs completed per minute under %s](%s/%s)\n", p.Label, dirs[i], FileRates)
		}
		for _, n := range p.Report.Notes {
			w("  - %s\n", n)
		}
		if f := p.Report.Faults; f != nil {
			for _, line := range faultSentences(f) {
				w("  - %s\n", line)
			}
		}
	}
	if dirs == nil {
		w("\nCharts: `gpupolicy verify --compare-with … --report DIR` writes %s (both policies) and each policy's report with its charts beside report.md.\n", FileHandoff)
	}
	w("\n## Restored\n\n%s\n", restoredSentence(s.Restored))
	return b.Bytes()
}

// SideBySideText is the side-by-side result for a terminal.
func SideBySideText(s *SideBySide) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s\n", sideBySideIntro(s))
	for i, p := range s.Policies {
		w("  %d. %s (%s)", i+1, p.Label, p.Source)
		if p.Report != nil {
			w(": %s, lock %s, run %s", p.Report.Template, lockCell(p.Report.Lock), p.Report.RunID)
		}
		if p.Error != "" {
			w("; stopped: %s", p.Error)
		}
		w("\n")
	}
	if len(s.Levels) > 0 {
		a, c := s.Policies[0].Label, s.Policies[1].Label
		w("\n%-9s %-24s %9s %9s %10s %11s %9s\n", "together", "policy", "jobs/min", "at once", "predicted", "median gap", "before pod")
		for _, l := range s.Levels {
			for i, ls := range l.Policies {
				w("%-9d %-24s %9s %9d %10d %11s %9s\n", l.Level, clip(s.Policies[i].Label, 24), rate(ls.RatePerMin), ls.MaxRunning, ls.Predicted,
					optSecs(ls.MedianGapSeconds), optSecs(ls.BeforePodSeconds))
			}
			if l.RateRatio != nil {
				w("%-9s %s ÷ %s: %s\n", "", c, a, ratio2(l.RateRatio))
			}
		}
		for _, l := range s.Levels {
			for i, ls := range l.Policies {
				if ls.Handoffs == 0 {
					continue
				}
				w("\n%d together, %s, %d hand-off(s): gap %s", l.Level, s.Policies[i].Label, ls.Handoffs, optSecs(ls.MedianGapSeconds))
				for _, p := range ls.Handoff {
					w("; %s %s", p.Label, partCell(p))
				}
			}
		}
		if hasHandoffs(s) {
			w("\n")
		}
		for _, line := range oneAtATimeLines(s) {
			w("\n%s\n", line)
		}
	}
	for _, p := range s.Policies {
		if p.Report == nil {
			continue
		}
		for _, n := range p.Report.Notes {
			w("note: %s: %s\n", p.Label, n)
		}
		if f := p.Report.Faults; f != nil {
			for _, line := range faultSentences(f) {
				w("%s: %s\n", p.Label, line)
			}
		}
	}
	w("\n%s\n", restoredSentence(s.Restored))
	verdict(&b, s.Findings, "both policies admitted what they predict", "the policies")
	return b.Bytes()
}

func sideBySideIntro(s *SideBySide) string {
	var r *Report
	for _, p := range s.Policies {
		if p.Report != nil {
			r = p.Report
			break
		}
	}
	what := "The same batches"
	if r != nil {
		var levels []string
		for _, l := range r.Levels {
			levels = append(levels, itoa(l.Level))
		}
		what = fmt.Sprintf("The same batches (%s submitted together, each job holding the GPU %s after its work", strings.Join(levels, ", "), fmtSecs(r.HoldSeconds))
		if r.Cancel != nil {
			what += "; a cancel"
		}
		if r.Faults != nil {
			what += "; a fault batch"
		}
		what += ")"
	}
	s2 := what + " under two policies, one after the other on the same cluster"
	if s.Environment != "" {
		s2 += " (environment " + s.Environment + ")"
	}
	s2 += ": each policy's render was reconciled before its batches"
	if s.Restored.What != "" {
		s2 += ", and " + s.Restored.What + " put back at the end"
	}
	s2 += "."
	if !s.Started.IsZero() && !s.Finished.IsZero() {
		s2 += fmt.Sprintf(" %s to %s UTC.", s.Started.UTC().Format("2006-01-02 15:04:05"), s.Finished.UTC().Format("15:04:05"))
	}
	return s2
}

// oneAtATimeLines explain, for each level both policies ran one job at a
// time, why the rates differ by what they do.
func oneAtATimeLines(s *SideBySide) []string {
	var out []string
	for _, l := range s.Levels {
		ta, tc := l.Policies[0].Time, l.Policies[1].Time
		if ta == nil || tc == nil || l.RateRatio == nil {
			continue
		}
		a, c := s.Policies[0].Label, s.Policies[1].Label
		line := fmt.Sprintf("%d together, one at a time: a batch took %s under %s (first start %s + runs %s + gaps %s) and %s under %s (%s + %s + %s), so %s completes %s as many jobs a minute.",
			l.Level, fmtSecs(ta.TotalSeconds), a, fmtSecs(ta.FirstStartSeconds), fmtSecs(ta.RunsSeconds), fmtSecs(ta.GapsSeconds),
			fmtSecs(tc.TotalSeconds), c, fmtSecs(tc.FirstStartSeconds), fmtSecs(tc.RunsSeconds), fmtSecs(tc.GapsSeconds), c, ratio2(l.RateRatio))
		if l.Level > 1 {
			line += fmt.Sprintf(" The runs are the jobs' own time and stay whatever the policy; only the first start and the %d gap(s) can move.", l.Level-1)
		}
		if g := l.GapForDouble; g != nil && l.Policies[0].MedianGapSeconds != nil && *l.RateRatio < 2 {
			line += fmt.Sprintf(" For twice the rate, %s's gaps would have had to be %s each, not the %s measured.", a, fmtSecs(*g), fmtSecs(*l.Policies[0].MedianGapSeconds))
		}
		out = append(out, line)
	}
	return out
}

func hasHandoffs(s *SideBySide) bool {
	for _, l := range s.Levels {
		for _, ls := range l.Policies {
			if ls.Handoffs > 0 {
				return true
			}
		}
	}
	return false
}

func rateRange(ls LevelSide) string {
	v := rate(ls.RatePerMin)
	if ls.RateMin != nil && ls.RateMax != nil && *ls.RateMin != *ls.RateMax {
		v += " (" + rng(ls.RateMin, ls.RateMax) + ")"
	}
	return v
}

func lockCell(l *LockInfo) string {
	if l == nil {
		return "none (Kueue alone)"
	}
	s := fmt.Sprintf("%s: %d", l.Name, l.Size)
	if l.Live != nil && *l.Live != l.Size {
		s += fmt.Sprintf(" (%d on the cluster)", *l.Live)
	}
	return s
}

func restoredSentence(r Restoration) string {
	switch {
	case r.What == "":
		return "Nothing was restored."
	case r.Done:
		return "Restored " + r.What + " on the cluster."
	default:
		return fmt.Sprintf("Restoring %s FAILED (%s): the cluster may still hold another policy's render; run gpupolicy reconcile for the environment.", r.What, r.Error)
	}
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// SideBySideHandoffChart draws both policies' hand-offs by part: per level,
// a bar for each policy that had hand-offs there.
func SideBySideHandoffChart(s *SideBySide) []byte {
	var rows []handoffRow
	for _, l := range s.Levels {
		for i, p := range s.Policies {
			if p.Report == nil {
				continue
			}
			for _, ls := range p.Report.Levels {
				if ls.Level != l.Level {
					continue
				}
				if row, ok := levelHandoffRow(ls); ok {
					row.Label = clip(s.Policies[i].Label, 19)
					row.Sub = fmt.Sprintf("%d together, %d hand-off(s)", ls.Level, row.Handoffs)
					rows = append(rows, row)
				}
			}
		}
	}
	return handoffChart(rows)
}

// WriteSideBySideDir writes report.md (linking the charts), report.json
// and handoff.svg (both policies) into dir, and each policy's own report
// (WriteDir) into dir/N-LABEL; every file atomically.
func WriteSideBySideDir(dir string, s *SideBySide) error {
	var js bytes.Buffer
	if err := output.WriteJSON(&js, s); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dirs := make([]string, len(s.Policies))
	for i, p := range s.Policies {
		dirs[i] = fmt.Sprintf("%d-%s", i+1, slug(p.Label))
		if p.Report != nil {
			if err := WriteDir(filepath.Join(dir, dirs[i]), p.Report); err != nil {
				return err
			}
		}
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"report.md", sideBySideMarkdown(s, dirs)},
		{"report.json", js.Bytes()},
		{FileHandoff, SideBySideHandoffChart(s)},
	} {
		if err := atomicfile.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// slug is a label as a folder name: lowercase letters, digits and dashes.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.TrimSuffix(b.String(), "-")
	if len(out) > 40 {
		out = strings.TrimSuffix(out[:40], "-")
	}
	if out == "" {
		out = "policy"
	}
	return out
}

// ratio2 is a ratio to two decimals ("1.42×"): the side-by-side figure.
func ratio2(v *float64) string {
	if v == nil {
		return "—"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64) + "×"
}
