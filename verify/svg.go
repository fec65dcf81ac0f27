package verify

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"time"
)

// Timeline colours: waiting light, running dark, as in the write-ups'
// figures; the cancel request is a red mark.
const (
	colourWaiting = "#c8d3df"
	colourRunning = "#2f6fb0"
	colourCancel  = "#c0392b"
	colourText    = "#222222"
	colourMuted   = "#666666"
	colourGrid    = "#e6e6e6"
)

// Timeline draws the batches as an SVG: a bar per job, waiting (from its
// batch's submission to its start) and running (from its start, its own
// stamp when known, to its end) in two colours, one group per batch, a
// shared time axis in seconds since each batch was submitted, and a legend.
// Each bar carries a <title> with its exact times. The output is
// deterministic.
func Timeline(r *Report) []byte {
	const (
		width    = 960.0
		labelW   = 200.0
		rightW   = 100.0
		top      = 78.0
		rowH     = 18.0
		barH     = 12.0
		headerH  = 22.0
		groupGap = 8.0
		axisH    = 44.0
	)
	plotW := width - labelW - rightW

	// The scale: the longest batch, to a round number of seconds.
	maxS := 1.0
	rows := 0
	for _, b := range r.Batches {
		rows += len(b.Jobs)
		maxS = math.Max(maxS, batchSpan(b))
	}
	step := niceStep(maxS / 8)
	maxS = math.Ceil(maxS/step) * step
	x := func(s float64) float64 { return labelW + plotW*math.Max(0, s)/maxS }

	height := top + float64(len(r.Batches))*(headerH+groupGap) + float64(rows)*rowH + axisH
	var buf bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&buf, format, args...) }
	w(`<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="sans-serif" font-size="11">`+"\n",
		num(width), num(height), num(width), num(height))
	w(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	title := "When each job waited and ran, from the moment its batch was submitted"
	w(`<text x="12" y="22" font-size="14" font-weight="bold" fill="%s">%s</text>`+"\n", colourText, esc(title))
	sub := fmt.Sprintf("%s via %s at %s priority, each job holding the GPU %s after its work", r.Namespace, r.Template, r.Priority, fmtSecs(r.HoldSeconds))
	w(`<text x="12" y="40" fill="%s">%s</text>`+"\n", colourMuted, esc(sub))

	// Legend.
	lx := 12.0
	w(`<g id="legend">` + "\n")
	w(`<rect x="%s" y="50" width="14" height="%s" fill="%s"/><text x="%s" y="60" fill="%s">submitted, waiting</text>`+"\n",
		num(lx), num(barH), colourWaiting, num(lx+18), colourText)
	lx += 140
	w(`<rect x="%s" y="50" width="14" height="%s" fill="%s"/><text x="%s" y="60" fill="%s">running, from the job's start to its end</text>`+"\n",
		num(lx), num(barH), colourRunning, num(lx+18), colourText)
	lx += 250
	if slices.ContainsFunc(r.Batches, func(b Batch) bool { return b.Cancel != nil }) {
		w(`<line x1="%s" y1="48" x2="%s" y2="64" stroke="%s" stroke-width="2"/><text x="%s" y="60" fill="%s">the cancel request</text>`+"\n",
			num(lx+7), num(lx+7), colourCancel, num(lx+18), colourText)
	}
	w("</g>\n")

	// Grid lines behind the bars.
	plotTop, plotBottom := top, height-axisH
	w(`<g id="grid" stroke="%s">`+"\n", colourGrid)
	for s := 0.0; s <= maxS+1e-9; s += step {
		w(`<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", num(x(s)), num(plotTop), num(x(s)), num(plotBottom))
	}
	w("</g>\n")

	y := top
	for bi, b := range r.Batches {
		head := b.Label() + " · " + b.State.Label() + " · predicted " + itoa(min(len(b.Jobs), b.Predicted.Admitted)) + " at once"
		if b.StarveWatchSeconds > 0 {
			head += " · watched " + fmtSecs(b.StarveWatchSeconds)
		}
		w(`<g id="batch-%d">`+"\n", bi+1)
		w(`<text x="12" y="%s" font-weight="bold" fill="%s">%s</text>`+"\n", num(y+15), colourText, esc(head))
		y += headerH
		for _, j := range b.Jobs {
			mid := y + rowH/2
			w(`<text x="%s" y="%s" text-anchor="end" fill="%s">job %d</text>`+"\n", num(labelW-8), num(mid+4), colourText, j.Index)
			sub := rel(j.Submitted, b.Submitted)
			start := j.Started()
			end := j.Ended
			waitEnd := b.Until
			if !start.IsZero() {
				waitEnd = start
			}
			ws, we := sub, rel(waitEnd, b.Submitted)
			if we > ws {
				w(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`+"\n",
					num(x(ws)), num(mid-barH/2), num(x(we)-x(ws)), num(barH), colourWaiting,
					esc(fmt.Sprintf("%s waiting: submitted +%s, %s +%s%s", j.Name, f1(ws), waitWord(start), f1(we), admittedNote(j, b.Submitted))))
			}
			label := ""
			if !start.IsZero() {
				rs := rel(start, b.Submitted)
				re := rel(b.Until, b.Submitted)
				if !end.IsZero() {
					re = rel(end, b.Submitted)
				}
				if re < rs {
					re = rs
				}
				w(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`+"\n",
					num(x(rs)), num(mid-barH/2), num(math.Max(1, x(re)-x(rs))), num(barH), colourRunning,
					esc(fmt.Sprintf("%s running: started +%s (%s), ended +%s, %s", j.Name, f1(rs), j.StartSource(), f1(re), j.Outcome)))
				label = fmtSecs(re - rs)
				if j.Outcome == Cancelled {
					label += " cancelled"
				} else if j.Outcome != Succeeded {
					label += " " + string(j.Outcome)
				}
			} else {
				label = "waited " + fmtSecs(we-ws)
			}
			w(`<text x="%s" y="%s" fill="%s">%s</text>`+"\n", num(labelW+plotW+6), num(mid+4), colourMuted, esc(label))
			if b.Cancel != nil && b.Cancel.Job == j.Name {
				cx := x(rel(b.Cancel.Requested, b.Submitted))
				w(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"><title>%s</title></line>`+"\n",
					num(cx), num(mid-barH/2-2), num(cx), num(mid+barH/2+2), colourCancel,
					esc(fmt.Sprintf("cancel requested +%s (spec.shutdown=%s)", f1(rel(b.Cancel.Requested, b.Submitted)), b.Cancel.Strategy)))
			}
			y += rowH
		}
		w("</g>\n")
		y += groupGap
	}

	secondsAxis(&buf, x, maxS, step, plotBottom+6, "seconds since the batch was submitted")
	w("</svg>\n")
	return buf.Bytes()
}

// secondsAxis draws a time axis at y = ay from 0 to maxS seconds, a tick
// and label every step, and its caption below.
func secondsAxis(buf *bytes.Buffer, x func(float64) float64, maxS, step, ay float64, caption string) {
	w := func(format string, args ...any) { fmt.Fprintf(buf, format, args...) }
	w(`<g id="axis" fill="%s">`+"\n", colourText)
	w(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", num(x(0)), num(ay), num(x(maxS)), num(ay), colourText)
	for s := 0.0; s <= maxS+1e-9; s += step {
		w(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/><text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n",
			num(x(s)), num(ay), num(x(s)), num(ay+4), colourText, num(x(s)), num(ay+16), num(s))
	}
	w(`<text x="%s" y="%s" text-anchor="middle" fill="%s">%s</text>`+"\n", num(x(maxS/2)), num(ay+32), colourMuted, esc(caption))
	w("</g>\n")
}

func waitWord(start time.Time) string {
	if start.IsZero() {
		return "still waiting at"
	}
	return "started"
}

func admittedNote(j Job, t0 time.Time) string {
	s := ""
	if !j.PodCreated.IsZero() {
		s += ", pod created +" + f1(rel(j.PodCreated, t0))
	}
	if !j.Admitted.IsZero() {
		s += ", admitted by the queue +" + f1(rel(j.Admitted, t0))
	}
	if j.Message != "" {
		s += " (" + j.Message + ")"
	}
	return s
}

// batchSpan is how long the batch's timeline runs, in seconds.
func batchSpan(b Batch) float64 {
	end := b.Until
	for _, j := range b.Jobs {
		if j.Ended.After(end) {
			end = j.Ended
		}
	}
	return rel(end, b.Submitted)
}

func rel(t, t0 time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return t.Sub(t0).Seconds()
}

// niceStep rounds a tick step up to 1, 2 or 5 × 10^k seconds.
func niceStep(s float64) float64 {
	if s <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(s)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= s {
			return m * p
		}
	}
	return 10 * p
}

func num(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

func f1(v float64) string { return fmt.Sprintf("%.1f s", v) }

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
