package status

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/output"
)

// Formats are the -o formats status accepts.
var Formats = []output.Format{output.Text, output.JSON, output.YAML, output.Markdown}

// Write writes the report in a format.
func (r *Report) Write(w io.Writer, f output.Format) error {
	return output.Write(w, f, r, r.WriteText, r.WriteMarkdown)
}

func amountsWords(as []Amount) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, fmt.Sprintf("%s %s/%s", a.Resource, a.Used, a.Quota))
	}
	return strings.Join(parts, "  ")
}

// Headline is the one-line answer: how many wait, how many are stuck.
func (r *Report) Headline() string {
	env := r.Policy
	if r.Environment != "" {
		env = r.Environment + " (policy " + r.Policy + ")"
	}
	return fmt.Sprintf("%s at %s: %s; %d running, %d waiting, %d stuck",
		env, r.Now.Format("15:04:05 UTC"), r.State, len(r.Running), len(r.Waiting), r.Stuck)
}

// WriteText writes the report for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintln(w, r.Headline())
	fmt.Fprintln(w)
	for _, v := range r.Waiting {
		mark := "waiting"
		if v.Stuck {
			mark = "STUCK"
		}
		fmt.Fprintf(w, "%s  Workflow %s (%s, %s) waits %s: %s [%s]\n", mark, v.Workflow, v.Template, v.Priority, wherePhrase(v.Where), v.Reason, durationWords(v.WaitingSeconds))
		fmt.Fprintf(w, "  why:   %s\n", v.Summary)
		fmt.Fprintf(w, "  until: %s\n", v.Until.Words)
		for _, e := range v.Evidence {
			fmt.Fprintf(w, "  - %s\n", e)
		}
		fmt.Fprintln(w)
	}
	for _, c := range r.Predictions {
		fmt.Fprintf(w, "prediction: %s\n", c.Words)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "At a glance:")
	for _, s := range r.Services {
		state := "down"
		if s.Up {
			state = "up"
		}
		line := fmt.Sprintf("  service %-12s %-9s %s", s.Name, s.Mode, state)
		if s.Since != nil {
			line += " since " + s.Since.Format("15:04:05")
		}
		if s.LastRequest != nil {
			line += ", last request " + s.LastRequest.Format("15:04:05")
		}
		if s.ScaleDownAt != nil {
			line += ", scales down at " + s.ScaleDownAt.Format("15:04:05") + " unless a request comes"
		}
		if s.Up && s.LastRequest == nil && s.LastRequestFrom != "" {
			line += " (" + s.LastRequestFrom + ")"
		}
		fmt.Fprintln(w, line)
	}
	for _, q := range r.Queues {
		fmt.Fprintf(w, "  queue %s (%s): %s; %d admitted, %d pending\n", q.Queue, q.Card, amountsWords(q.Amounts), q.Admitted, q.Pending)
	}
	for _, c := range r.Cards {
		fmt.Fprintf(w, "  card %s: %s\n", c.Card, amountsWords(c.Amounts))
	}
	for _, l := range r.Locks {
		fmt.Fprintf(w, "  lock %s: %d of %d slots held, %d waiting\n", l.Lock, l.Held, l.Size, l.Waiting)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

func wherePhrase(where string) string {
	switch where {
	case AtLock:
		return "at an Argo lock"
	case InKueue:
		return "in Kueue"
	case OnNode:
		return "on a node"
	}
	return where
}

func durationWords(s int64) string {
	if s < 120 {
		return fmt.Sprintf("%d s", s)
	}
	if s < 7200 {
		return fmt.Sprintf("%d min", s/60)
	}
	return fmt.Sprintf("%.1f h", float64(s)/3600)
}

// WriteMarkdown writes the report for a pull request or a scheduled report.
func (r *Report) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "## GPU status: %s\n\n", r.Headline())
	if len(r.Waiting) > 0 {
		fmt.Fprintln(w, "| job | waits | why | until | stuck |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
		for _, v := range r.Waiting {
			stuck := ""
			if v.Stuck {
				stuck = "**yes**"
			}
			fmt.Fprintf(w, "| `%s` (%s, %s) | %s: `%s` | %s | %s | %s |\n", v.Workflow, v.Template, v.Priority, wherePhrase(v.Where), v.Reason, mdCell(v.Summary), mdCell(v.Until.Words), stuck)
		}
		fmt.Fprintln(w)
	}
	for _, c := range r.Predictions {
		fmt.Fprintf(w, "- prediction: %s\n", c.Words)
	}
	fmt.Fprintln(w, "\n| queue | card | use / quota | admitted | pending |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	for _, q := range r.Queues {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d |\n", q.Queue, q.Card, amountsWords(q.Amounts), q.Admitted, q.Pending)
	}
	fmt.Fprintln(w)
	for _, s := range r.Services {
		state := "down"
		if s.Up {
			state = "up"
		}
		fmt.Fprintf(w, "- service `%s` (%s): %s\n", s.Name, s.Mode, state)
	}
	for _, l := range r.Locks {
		fmt.Fprintf(w, "- lock `%s`: %d of %d slots held, %d waiting\n", l.Lock, l.Held, l.Size, l.Waiting)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "- note: %s\n", n)
	}
	return nil
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// WriteChanges prints, one line each, what changed since prev (a job's
// verdict keyed by Workflow, and the counts) with the time, and returns
// the new state to pass next time. --watch uses it when not on a terminal.
func WriteChanges(w io.Writer, prev map[string]string, r *Report) map[string]string {
	now := r.Now.Format("15:04:05")
	cur := map[string]string{}
	counts := fmt.Sprintf("%s; %d running, %d waiting, %d stuck", r.State, len(r.Running), len(r.Waiting), r.Stuck)
	cur[""] = counts
	if prev[""] != counts {
		fmt.Fprintf(w, "%s %s\n", now, counts)
	}
	for _, v := range r.Waiting {
		at := ""
		if v.Until.At != nil {
			at = v.Until.At.Format("15:04:05")
		}
		k := v.Where + "/" + v.Reason + "/" + v.Until.Kind + "/" + at
		cur[v.Workflow] = k
		if prev[v.Workflow] != k {
			fmt.Fprintf(w, "%s Workflow %s waits %s (%s): %s; until %s\n", now, v.Workflow, wherePhrase(v.Where), v.Reason, v.Summary, v.Until.Words)
		}
	}
	for _, wf := range slices.Sorted(maps.Keys(prev)) {
		if _, ok := cur[wf]; !ok && wf != "" {
			fmt.Fprintf(w, "%s Workflow %s no longer waits\n", now, wf)
		}
	}
	return cur
}
