package admission

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// The answer per template and priority, as people read it: what runs with
// every on-demand service down and with all up, what each service does
// alone, and what starves the priority.

// maxEffectsListed bounds the services whose effect one outlook lists in
// text and markdown (JSON lists every one).
const maxEffectsListed = 5

// answerWords is "4 (shares, memory bind)", "0 (gpu-memory binds), 4 by
// evicting qwen2-5-7b", "0 (gpu-memory binds), waits".
func answerWords(a Answer) string {
	s := fmt.Sprint(a.Admitted) + cardsWords(a.Cards)
	var res []string
	for _, b := range a.Binding {
		res = append(res, shortRes(b))
	}
	switch {
	case a.BoundBy == "never-fits":
		s += " (never fits: " + strings.Join(res, ", ") + ")"
	case a.BoundBy == "lock":
		s += " (the lock binds)"
	case len(res) == 1:
		s += " (" + res[0] + " binds)"
	case len(res) > 1:
		s += " (" + strings.Join(res, ", ") + " bind)"
	}
	if a.Preemption != nil {
		var ev []string
		for _, e := range a.Preemption.Evicts {
			ev = append(ev, e.Workload)
		}
		ev = dedupe(ev)
		if len(ev) > 3 {
			ev = append(ev[:3], fmt.Sprintf("%d more", len(ev)-3))
		}
		s += fmt.Sprintf(", %d by evicting %s", a.Preemption.Admitted, strings.Join(ev, ", "))
	}
	if a.Starved {
		s += ", waits"
	}
	if !a.Reachable {
		s += " (unreachable: a service that is up does not fit)"
	}
	return s
}

// effectLines says what each service that changes the answer does: "while
// qwen2-5-7b is up: 0 (gpu-memory binds), waits, instead of 4".
func effectLines(o Outlook) (lines []string, unchanged int) {
	best := answerWords(o.Best)
	changed := 0
	for _, a := range o.Effects {
		got := answerWords(a)
		if got == best {
			unchanged++
			continue
		}
		changed++
		if changed <= maxEffectsListed {
			lines = append(lines, fmt.Sprintf("while %s is up: %s instead of %d", strings.Join(a.Up, ""), got, o.Best.Admitted))
		}
	}
	if changed > maxEffectsListed {
		lines = append(lines, fmt.Sprintf("%d more services change it (-o json lists each)", changed-maxEffectsListed))
	}
	return lines, unchanged
}

func starvedWords(o Outlook) string {
	var sets []string
	for i, s := range o.StarvedBy {
		if i == 3 {
			sets = append(sets, fmt.Sprintf("%d more sets", len(o.StarvedBy)-3))
			break
		}
		switch len(s) {
		case 0:
			sets = append(sets, "always (every on-demand service down)")
		case 1:
			sets = append(sets, s[0]+" is up")
		default:
			sets = append(sets, strings.Join(s, " and ")+" are up")
		}
	}
	w := strings.Join(sets, "; or ")
	if !o.Search.Exact && o.Search.Note != "" {
		w += " [bounded search: " + o.Search.Note + "]"
	}
	return w
}

func (r *Report) writeOutlooksText(w io.Writer) {
	if len(r.Summary) == 0 {
		fmt.Fprintf(w, "\nNo GPU step templates.\n")
		return
	}
	for i := 0; i < len(r.Summary); {
		o := r.Summary[i]
		fmt.Fprintf(w, "\n%s (queue %s, %s)", o.Template, o.Queue, outlookCardWords(o))
		switch {
		case len(o.Services) == 0:
			fmt.Fprintf(w, ": no on-demand service shares its quota\n")
		case len(o.Services) <= 3:
			fmt.Fprintf(w, ": on-demand services that share its quota: %s\n", strings.Join(o.Services, ", "))
		default:
			fmt.Fprintf(w, ": %d on-demand services share its quota\n", len(o.Services))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  PRIORITY\tALL DOWN\tALL UP")
		var notes []string
		for ; i < len(r.Summary) && r.Summary[i].Template == o.Template; i++ {
			x := r.Summary[i]
			worst := answerWords(x.Worst)
			if len(x.Services) == 0 {
				worst = "-"
			}
			fmt.Fprintf(tw, "  %s (%d)\t%s\t%s\n", x.Priority, x.PriorityValue, answerWords(x.Best), worst)
			lines, unchanged := effectLines(x)
			if len(lines) > 0 && len(x.Services) > 1 {
				for _, l := range lines {
					notes = append(notes, fmt.Sprintf("%s: %s", x.Priority, l))
				}
				if unchanged > 0 && len(x.Services) > 1 {
					notes = append(notes, fmt.Sprintf("%s: %d services alone change nothing", x.Priority, unchanged))
				}
			}
			if len(x.StarvedBy) > 0 {
				notes = append(notes, fmt.Sprintf("%s starves while %s", x.Priority, starvedWords(x)))
			}
		}
		tw.Flush()
		for _, n := range notes {
			writeHanging(w, n)
		}
	}
}

// writeOutlooksMarkdown writes one table line per template × priority,
// merging the templates whose answers read the same, so that a policy with
// hundreds of services and templates fits a pull-request comment.
func (r *Report) writeOutlooksMarkdown(w io.Writer) {
	if len(r.Summary) == 0 {
		fmt.Fprintf(w, "No GPU step templates.\n\n")
		return
	}
	type line struct {
		templates []string
		cells     []string
	}
	var lines []*line
	byCells := map[string]*line{}
	for _, o := range r.Summary {
		effects, _ := effectLines(o)
		worst := answerWords(o.Worst)
		if len(o.Services) == 0 {
			worst = "-"
		}
		starves := "-"
		if len(o.StarvedBy) > 0 {
			starves = starvedWords(o)
		}
		services := fmt.Sprint(len(o.Services))
		cells := []string{fmt.Sprintf("%s (%d)", o.Priority, o.PriorityValue), services,
			"**" + answerWords(o.Best) + "**", worst, orNothing(strings.Join(effects, "; "), "-"), starves}
		key := strings.Join(cells, "\x00")
		l := byCells[key]
		if l == nil {
			l = &line{cells: cells}
			byCells[key] = l
			lines = append(lines, l)
		}
		l.templates = append(l.templates, o.Template)
	}
	fmt.Fprintf(w, "| template | priority | on-demand services sharing its quota | all down | all up | what a service alone does | starves while |\n")
	fmt.Fprintf(w, "|%s\n", strings.Repeat(" --- |", 7))
	for _, l := range lines {
		names := l.templates
		t := "`" + strings.Join(names, "`, `") + "`"
		if len(names) > 3 {
			t = fmt.Sprintf("`%s`, `%s` and %d more", names[0], names[1], len(names)-2)
		}
		row := append([]string{t}, l.cells...)
		for i := range row {
			row[i] = strings.ReplaceAll(row[i], "|", "\\|")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
}
