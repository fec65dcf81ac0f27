package verify

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// The report's two charts beside the timeline: the completion rate by how
// many jobs were submitted together (the first write-up's figure 2) and the
// hand-off by part (its figure 3). Both are plain SVG with a white
// background, fixed sizes and <title> tooltips, readable in a browser and
// linked from a pull-request comment; both are deterministic.

const (
	colourLone  = "#888888"
	colourPoint = "#2f6fb0"
	colourRange = "#2f6fb0"
)

// rateChart is the rate chart's geometry, computed apart from its drawing
// so that it can be tested on the write-up's numbers.
type rateChart struct {
	Width, Height           float64
	Left, Top, PlotW, PlotH float64
	// MaxLevel is the x axis's last level; YMax the y axis's top (jobs/min)
	// and YStep its tick step.
	MaxLevel    int
	YMax, YStep float64
	Points      []ratePoint
	// Lone is the lone job's rate × n line, one vertex per level from 1 to
	// MaxLevel; empty without a level 1.
	Lone [][2]float64
}

// ratePoint is one level: its mean rate and its range across batches.
type ratePoint struct {
	Level             int
	Rate, Low, High   float64
	Batches           int
	X, Y, YLow, YHigh float64
}

// x and y map a level and a rate to the plot.
func (c rateChart) x(level float64) float64 {
	return c.Left + c.PlotW*level/(float64(c.MaxLevel)+0.5)
}

func (c rateChart) y(rate float64) float64 { return c.Top + c.PlotH*(1-rate/c.YMax) }

// rateGeometry lays out the rate chart; ok is false when no level has a
// rate.
func rateGeometry(r *Report) (rateChart, bool) {
	c := rateChart{Width: 640, Height: 440, Left: 64, Top: 100, PlotW: 640 - 64 - 120, PlotH: 440 - 100 - 56}
	top := 0.0
	for _, l := range r.Levels {
		if l.RatePerMin == nil || l.Starved {
			continue
		}
		c.MaxLevel = max(c.MaxLevel, l.Level)
		top = math.Max(top, *l.RatePerMin)
		if l.RateMax != nil {
			top = math.Max(top, *l.RateMax)
		}
	}
	if c.MaxLevel == 0 {
		return c, false
	}
	if r.LoneRatePerMin != nil {
		top = math.Max(top, *r.LoneRatePerMin*float64(c.MaxLevel))
	}
	c.YStep = niceRateStep(top / 5)
	c.YMax = math.Ceil(top*1.02/c.YStep) * c.YStep
	if c.YMax <= 0 {
		c.YMax = c.YStep
	}
	for _, l := range r.Levels {
		if l.RatePerMin == nil || l.Starved {
			continue
		}
		p := ratePoint{Level: l.Level, Rate: *l.RatePerMin, Low: *l.RatePerMin, High: *l.RatePerMin, Batches: len(l.BatchRates)}
		if l.RateMin != nil && l.RateMax != nil {
			p.Low, p.High = *l.RateMin, *l.RateMax
		}
		p.X, p.Y, p.YLow, p.YHigh = c.x(float64(l.Level)), c.y(p.Rate), c.y(p.Low), c.y(p.High)
		c.Points = append(c.Points, p)
	}
	if r.LoneRatePerMin != nil {
		for n := 1; n <= c.MaxLevel; n++ {
			c.Lone = append(c.Lone, [2]float64{c.x(float64(n)), c.y(*r.LoneRatePerMin * float64(n))})
		}
	}
	return c, true
}

// niceRateStep rounds a tick step up to 1, 2 or 5 × 10^k (fractions
// allowed, unlike niceStep's whole seconds).
func niceRateStep(s float64) float64 {
	if s <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(s)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= s-1e-12 {
			return m * p
		}
	}
	return 10 * p
}

// RateChart draws jobs completed per minute by how many were submitted
// together: each level's mean over its batches (a point, labelled), the
// range across batches (a bar with caps), and one job alone's rate × n (a
// dashed line).
func RateChart(r *Report) []byte {
	c, ok := rateGeometry(r)
	var buf bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&buf, format, args...) }
	w(`<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="sans-serif" font-size="11">`+"\n",
		num(c.Width), num(c.Height), num(c.Width), num(c.Height))
	w(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	w(`<text x="12" y="22" font-size="14" font-weight="bold" fill="%s">%s</text>`+"\n", colourText, esc("Jobs completed per minute, by how many were submitted together"))
	w(`<text x="12" y="40" fill="%s">%s</text>`+"\n", colourMuted,
		esc("A batch's rate is its completed jobs over the time from its submission to its last job's end;"))
	w(`<text x="12" y="54" fill="%s">%s</text>`+"\n", colourMuted,
		esc(fmt.Sprintf("each job held the GPU %s after its work. A level's point is the mean over its batches.", fmtSecs(r.HoldSeconds))))
	if !ok {
		w(`<text x="12" y="70" fill="%s">%s</text>`+"\n</svg>\n", colourText, esc("No level completed a job, so there is no rate to chart."))
		return buf.Bytes()
	}
	// Legend.
	w(`<g id="legend">` + "\n")
	w(`<circle cx="19" cy="73" r="4" fill="%s"/><text x="28" y="77" fill="%s">mean over the batches</text>`+"\n", colourPoint, colourText)
	w(`<line x1="170" y1="67" x2="170" y2="79" stroke="%s" stroke-width="2"/><text x="178" y="77" fill="%s">the range across batches</text>`+"\n", colourRange, colourText)
	if len(c.Lone) > 0 {
		w(`<line x1="335" y1="73" x2="360" y2="73" stroke="%s" stroke-width="2" stroke-dasharray="5 3"/><text x="366" y="77" fill="%s">one job alone's rate × n</text>`+"\n", colourLone, colourText)
	}
	w("</g>\n")
	// Grid and y axis.
	bottom := c.Top + c.PlotH
	w(`<g id="y-axis" fill="%s">`+"\n", colourText)
	for v := 0.0; v <= c.YMax+1e-9; v += c.YStep {
		y := c.y(v)
		w(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/><text x="%s" y="%s" text-anchor="end">%s</text>`+"\n",
			num(c.Left), num(y), num(c.Left+c.PlotW), num(y), colourGrid, num(c.Left-6), num(y+4), trimFloat(v))
	}
	w(`<text x="14" y="%s" transform="rotate(-90 14 %s)" text-anchor="middle" fill="%s">jobs per minute</text>`+"\n", num(c.Top+c.PlotH/2), num(c.Top+c.PlotH/2), colourMuted)
	w("</g>\n")
	// X axis.
	w(`<g id="x-axis" fill="%s">`+"\n", colourText)
	w(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", num(c.Left), num(bottom), num(c.Left+c.PlotW), num(bottom), colourText)
	for n := 1; n <= c.MaxLevel; n++ {
		x := c.x(float64(n))
		w(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/><text x="%s" y="%s" text-anchor="middle">%d</text>`+"\n",
			num(x), num(bottom), num(x), num(bottom+4), colourText, num(x), num(bottom+16), n)
	}
	w(`<text x="%s" y="%s" text-anchor="middle" fill="%s">jobs submitted together</text>`+"\n", num(c.Left+c.PlotW/2), num(bottom+36), colourMuted)
	w("</g>\n")
	// The lone × n line.
	if len(c.Lone) > 0 {
		pts := ""
		for i, p := range c.Lone {
			if i > 0 {
				pts += " "
			}
			pts += num(p[0]) + "," + num(p[1])
		}
		last := c.Lone[len(c.Lone)-1]
		w(`<g id="lone"><polyline points="%s" fill="none" stroke="%s" stroke-width="2" stroke-dasharray="5 3"><title>%s</title></polyline>`+"\n",
			pts, colourLone, esc(fmt.Sprintf("one job alone, %s jobs/min, × n", rate(r.LoneRatePerMin))))
		w(`<text x="%s" y="%s" fill="%s">%s</text></g>`+"\n", num(last[0]+8), num(last[1]+4), colourLone,
			esc(fmt.Sprintf("lone × %d = %s", c.MaxLevel, strconv.FormatFloat(*r.LoneRatePerMin*float64(c.MaxLevel), 'f', 2, 64))))
	}
	// Points and ranges.
	for _, p := range c.Points {
		w(`<g id="level-%d">`+"\n", p.Level)
		tip := esc(fmt.Sprintf("%d submitted together: %.2f jobs/min over %d batch(es), range %.2f–%.2f", p.Level, p.Rate, p.Batches, p.Low, p.High))
		if p.YLow-p.YHigh >= 0.5 {
			w(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"><title>%s</title></line>`+"\n", num(p.X), num(p.YLow), num(p.X), num(p.YHigh), colourRange, tip)
			for _, y := range []float64{p.YLow, p.YHigh} {
				w(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"/>`+"\n", num(p.X-5), num(y), num(p.X+5), num(y), colourRange)
			}
		}
		w(`<circle cx="%s" cy="%s" r="4.5" fill="%s"><title>%s</title></circle>`+"\n", num(p.X), num(p.Y), colourPoint, tip)
		w(`<text x="%s" y="%s" fill="%s" font-weight="bold">%s</text>`+"\n", num(p.X+9), num(p.Y-6), colourText, strconv.FormatFloat(p.Rate, 'f', 2, 64))
		w("</g>\n")
	}
	w("</svg>\n")
	return buf.Bytes()
}

func trimFloat(v float64) string {
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

// handoffRow is one bar of the hand-off chart: a level's parts' medians.
type handoffRow struct {
	Label string
	// Sub is the line under the label; default "N hand-off(s)".
	Sub      string
	Handoffs int
	Parts    []PartSummary
	// Median, Low and High are the whole gap's median and range.
	Median, Low, High float64
}

func handoffRows(r *Report) []handoffRow {
	var rows []handoffRow
	for _, l := range r.Levels {
		if row, ok := levelHandoffRow(l); ok {
			rows = append(rows, row)
		}
	}
	return rows
}

// levelHandoffRow is a level's bar, labelled "N together"; false when the
// level had no hand-off.
func levelHandoffRow(l LevelSummary) (handoffRow, bool) {
	if len(l.Gaps) == 0 {
		return handoffRow{}, false
	}
	var xs []float64
	for _, g := range l.Gaps {
		xs = append(xs, g.Seconds)
	}
	m, _ := Median(xs)
	return handoffRow{Label: fmt.Sprintf("%d together", l.Level), Handoffs: len(l.Gaps), Parts: l.Handoff,
		Median: m, Low: slices.Min(xs), High: slices.Max(xs)}, true
}

// HandoffChart draws the hand-off by part: per level with hand-offs, a
// stacked bar of each part's median, the whole gap's median and range
// beside it, and the stamps' resolution in the caption.
func HandoffChart(r *Report) []byte { return handoffChart(handoffRows(r)) }

func handoffChart(rows []handoffRow) []byte {
	const (
		width  = 960.0
		labelW = 150.0
		rightW = 190.0
		top    = 104.0
		rowH   = 34.0
		barH   = 20.0
		axisH  = 46.0
	)
	plotW := width - labelW - rightW
	maxS := 1.0
	for _, row := range rows {
		sum := 0.0
		for _, p := range row.Parts {
			if p.MedianSeconds != nil {
				sum += *p.MedianSeconds
			}
		}
		maxS = math.Max(maxS, math.Max(sum, row.Median))
	}
	step := niceStep(maxS / 8)
	maxS = math.Ceil(maxS/step) * step
	x := func(s float64) float64 { return labelW + plotW*math.Max(0, s)/maxS }
	height := top + float64(max(1, len(rows)))*rowH + axisH + 16
	var buf bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&buf, format, args...) }
	w(`<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="sans-serif" font-size="11">`+"\n",
		num(width), num(height), num(width), num(height))
	w(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	w(`<text x="12" y="22" font-size="14" font-weight="bold" fill="%s">%s</text>`+"\n", colourText, esc("The gap between one job ending and the next starting, by part"))
	w(`<text x="12" y="40" fill="%s">%s</text>`+"\n", colourMuted, esc(handoffCaption()))
	if len(rows) == 0 {
		w(`<text x="12" y="70" fill="%s">%s</text>`+"\n</svg>\n", colourText, esc("No job waited for another to end, so there is no hand-off to split."))
		return buf.Bytes()
	}
	// Legend, two rows.
	w(`<g id="legend">` + "\n")
	for i, p := range HandoffParts {
		lx := 12.0 + float64(i%3)*300
		ly := 52.0 + float64(i/3)*18
		w(`<rect x="%s" y="%s" width="14" height="12" fill="%s"/><text x="%s" y="%s" fill="%s">%s</text>`+"\n",
			num(lx), num(ly), p.Colour, num(lx+18), num(ly+10), colourText, esc(p.Label))
	}
	w("</g>\n")
	plotBottom := top + float64(len(rows))*rowH
	w(`<g id="grid" stroke="%s">`+"\n", colourGrid)
	for s := 0.0; s <= maxS+1e-9; s += step {
		w(`<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", num(x(s)), num(top-4), num(x(s)), num(plotBottom))
	}
	w("</g>\n")
	y := top
	for i, row := range rows {
		mid := y + rowH/2
		w(`<g id="row-%d">`+"\n", i+1)
		w(`<text x="%s" y="%s" text-anchor="end" fill="%s" font-weight="bold">%s</text>`+"\n", num(labelW-8), num(mid), colourText, esc(row.Label))
		sub := row.Sub
		if sub == "" {
			sub = fmt.Sprintf("%d hand-off(s)", row.Handoffs)
		}
		w(`<text x="%s" y="%s" text-anchor="end" fill="%s">%s</text>`+"\n", num(labelW-8), num(mid+13), colourMuted, esc(sub))
		cur := 0.0
		unknown := ""
		for k, p := range row.Parts {
			if p.MedianSeconds == nil {
				unknown = "start-up unknown (no job log)"
				continue
			}
			m := *p.MedianSeconds
			tip := fmt.Sprintf("%s: median %s, range %s–%s over %d hand-off(s)", p.Label, fmtSecs(m), fmtSecs(*p.MinSeconds), fmtSecs(*p.MaxSeconds), p.Known)
			if p.Unknown > 0 {
				tip += fmt.Sprintf(", unknown in %d", p.Unknown)
			}
			if m > 0 {
				w(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="#ffffff" stroke-width="1"><title>%s</title></rect>`+"\n",
					num(x(cur)), num(mid-barH/2), num(x(cur+m)-x(cur)), num(barH), HandoffParts[k].Colour, esc(tip))
				if x(cur+m)-x(cur) >= 30 {
					w(`<text x="%s" y="%s" text-anchor="middle" fill="#ffffff">%s</text>`+"\n", num((x(cur)+x(cur+m))/2), num(mid+4), esc(fmtSecs(m)))
				}
			}
			cur += m
		}
		// The whole gap's median, a tick over the bar.
		gx := x(row.Median)
		w(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"><title>%s</title></line>`+"\n",
			num(gx), num(mid-barH/2-4), num(gx), num(mid+barH/2+4), colourText,
			esc(fmt.Sprintf("the whole gap: median %s, range %s–%s", fmtSecs(row.Median), fmtSecs(row.Low), fmtSecs(row.High))))
		right := "gap " + medRange(row.Median, row.Low, row.High)
		w(`<text x="%s" y="%s" fill="%s">%s</text>`+"\n", num(labelW+plotW+8), num(mid), colourText, esc(right))
		if unknown != "" {
			w(`<text x="%s" y="%s" fill="%s">%s</text>`+"\n", num(labelW+plotW+8), num(mid+13), colourMuted, esc(unknown))
		}
		w("</g>\n")
		y += rowH
	}
	secondsAxis(&buf, x, maxS, step, plotBottom+6, "seconds from the previous job's end; each part's median stacked, the whole gap's median marked")
	w("</svg>\n")
	return buf.Bytes()
}

func handoffCaption() string {
	return "Pod and queue stamps come from the API server at 1 s resolution; the first part is the gap less the others, so it carries their rounding."
}
