package admission

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/output"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// Formats are the formats explain prints.
var Formats = output.All

// Write writes the report in a format (output.Writer): text, json (the
// contract), yaml (the same document) or markdown.
func (r *Report) Write(w io.Writer, f output.Format) error {
	return output.Write(w, f, r, r.WriteText, r.WriteMarkdown)
}

// WriteJSON writes the report as the JSON contract (README: explain -o json), indented,
// with a trailing newline. Map keys are sorted, rows and findings are in
// Explain's deterministic order, so equal policies give equal bytes.
func (r *Report) WriteJSON(w io.Writer) error { return output.WriteJSON(w, r) }

// short resource labels for the tables.
func shortRes(res string) string {
	switch {
	case policy.IsSharesResource(res):
		return "shares"
	case res == policy.ResourceHostMemory:
		return "memory"
	}
	if i := strings.LastIndex(res, "/"); i >= 0 {
		return res[i+1:]
	}
	return res
}

// stateCells are the per-row state cells: one column per on-demand service
// when there are at most three, else one STATE column listing those up.
func (r *Report) stateHeaders() []string {
	if len(r.OnDemand) <= 3 {
		return append([]string{}, r.OnDemand...)
	}
	return []string{"UP"}
}

func (r *Report) stateCells(c Capacity) []string {
	if len(r.OnDemand) <= 3 {
		out := make([]string, len(r.OnDemand))
		for i, n := range r.OnDemand {
			out[i] = c.State[n]
		}
		return out
	}
	var up []string
	for _, n := range r.OnDemand {
		if c.State[n] == policy.ServiceUp {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		return []string{"-"}
	}
	return []string{strings.Join(up, "+")}
}

func (r *Report) cells(c Capacity) (atOnce, quota, lock, left, preempt string) {
	atOnce = fmt.Sprint(c.Admitted)
	if !c.Reachable {
		atOnce += " (unreachable)"
	}
	switch c.BoundBy {
	case "never-fits":
		quota = "never fits: " + strings.Join(c.Binding, ", ")
	default:
		quota = fmt.Sprint(c.QuotaAdmits)
		if len(c.Binding) > 0 {
			quota += " (" + strings.Join(c.Binding, ", ") + ")"
		}
	}
	lock = "-"
	if c.Lock != nil {
		rel := map[string]string{"limits": "<", "matches": "=", "exceeds": ">"}[c.Lock.Effect]
		lock = fmt.Sprintf("%s %d %s %d", c.Lock.Name, c.Lock.Size, rel, c.Lock.Kueue)
		if c.Lock.Held > 0 {
			lock += fmt.Sprintf(", %d held waiting", c.Lock.Held)
		}
	}
	left = marginWords(c.Margin)
	preempt = "-"
	if c.Preemption != nil {
		var ev []string
		for _, e := range c.Preemption.Evicts {
			ev = append(ev, fmt.Sprintf("%s (%s)", e.Workload, e.Policy))
		}
		preempt = fmt.Sprintf("%d, evicting %s", c.Preemption.Admitted, strings.Join(dedupe(ev), ", "))
	} else if c.QuotaAdmits == 0 {
		preempt = "none: waits"
	}
	return
}

// marginWords prints a margin in Kinds order: "shares=0 memory=0
// gpu-memory=8508Mi".
func marginWords(m map[string]string) string {
	var parts []string
	for _, res := range []string{policy.SharesResourceName(false), policy.SharesResourceName(true), policy.ResourceHostMemory} {
		if v, ok := m[res]; ok {
			parts = append(parts, shortRes(res)+"="+v)
		}
	}
	var rest []string
	for res := range m {
		if !policy.IsSharesResource(res) && res != policy.ResourceHostMemory {
			rest = append(rest, res)
		}
	}
	sort.Strings(rest)
	for _, res := range rest {
		parts = append(parts, shortRes(res)+"="+m[res])
	}
	return strings.Join(parts, " ")
}

// showRows reports whether the text and markdown forms print the
// per-state table: when it was asked for, or when it is short.
func (r *Report) showRows() bool {
	return len(r.Capacity) > 0 && (r.States.Mode == StatesAll || len(r.OnDemand) <= 3)
}

// gate says what stands in front of Kueue: the Argo locks, none (Kueue
// alone gates every template) or some (where templates differ).
func (r *Report) gate() string {
	if r.gateText != "" {
		return r.gateText
	}
	var locked, free int
	for _, c := range r.Capacity {
		if c.Lock != nil {
			locked++
		} else {
			free++
		}
	}
	return gateWords(locked, free)
}

// gateOf counts the WorkflowTemplates (variants) that take a lock of the
// policy and those that take none.
func gateOf(p *policy.Policy) string {
	var locked, free int
	for _, v := range p.Variants() {
		if _, ok := p.SmallestLock(v.Locks); ok {
			locked++
		} else {
			free++
		}
	}
	return gateWords(locked, free)
}

func gateWords(locked, free int) string {
	switch {
	case locked == 0 && free > 0:
		return "no Argo lock: Kueue alone gates"
	case locked > 0 && free > 0:
		return "Argo locks in front where a template takes one, Kueue alone elsewhere"
	}
	return "Argo locks in front"
}

// WriteText writes the answer per template and priority, the per-state
// table when it is short or asked for, and the findings, for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "Policy %q: GPU jobs admitted at once (%s, %s)\n", r.Policy, r.Model, r.gate())
	if len(r.LockSizes) > 0 {
		fmt.Fprintf(w, "\nLocks sized from quota:\n")
		for _, ls := range r.LockSizes {
			fmt.Fprintf(w, "  %s\n", ls.Words)
		}
	}
	r.writeOutlooksText(w)
	r.writeExclusiveText(w)
	r.writeCohortsText(w)
	r.writeQueueingText(w)
	if r.showRows() {
		if err := r.writeRowsText(w); err != nil {
			return err
		}
	} else if len(r.OnDemand) > 0 {
		fmt.Fprintf(w, "\nPer-state rows: %s\n", r.statesWords())
	}
	r.writeAccessText(w)
	r.writeFindingsText(w)
	return nil
}

func (r *Report) statesWords() string {
	if r.States.Enumerated {
		return fmt.Sprintf("%d service states enumerated (-o json, or --states all to print them)", r.States.Count)
	}
	if len(r.OnDemand) > r.States.Limit {
		return fmt.Sprintf("not enumerated: %d on-demand services (--states all stops at %d)", len(r.OnDemand), r.States.Limit)
	}
	return fmt.Sprintf("not enumerated (%d on-demand services; --states all prints them)", len(r.OnDemand))
}

func (r *Report) writeRowsText(w io.Writer) error {
	fmt.Fprintf(w, "\nPer service state:\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"TEMPLATE", "QUEUE", "PRIORITY"}
	head = append(head, r.stateHeaders()...)
	head = append(head, "AT ONCE", "QUOTA ADMITS (BINDING)", "LOCK", "LEFT", "WITH PREEMPTION")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, c := range r.Capacity {
		atOnce, quota, lock, left, preempt := r.cells(c)
		row := []string{c.Template, c.Queue, fmt.Sprintf("%s (%d)", c.Priority, c.PriorityValue)}
		row = append(row, r.stateCells(c)...)
		row = append(row, atOnce, quota, lock, left, preempt)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

func (r *Report) writeFindingsText(w io.Writer) {
	fmt.Fprintf(w, "\nFindings: %d error(s), %d warning(s), %d info\n", r.Count(finding.Error), r.Count(finding.Warning), r.Count(finding.Info))
	for _, f := range r.Findings {
		where := f.Path
		if f.Pos != "" {
			where = f.Pos
		}
		fmt.Fprintf(w, "\n%-7s %s  %s\n", f.Severity, f.Rule, where)
		for _, line := range wrap(f.Message, 88) {
			fmt.Fprintf(w, "        %s\n", line)
		}
	}
}

// WriteMarkdown writes the report for a pull-request comment or a
// scheduled report.
func (r *Report) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "### gpupolicy explain: `%s`\n\n", r.Policy)
	fmt.Fprintf(w, "GPU jobs admitted at once, per template and priority (%s, %s). ", r.Model, r.gate())
	fmt.Fprintf(w, "**%d error(s), %d warning(s), %d info.**\n\n", r.Count(finding.Error), r.Count(finding.Warning), r.Count(finding.Info))
	if len(r.LockSizes) > 0 {
		fmt.Fprintf(w, "Locks sized from quota:\n\n")
		for _, ls := range r.LockSizes {
			fmt.Fprintf(w, "- %s\n", ls.Words)
		}
		fmt.Fprintln(w)
	}
	r.writeOutlooksMarkdown(w)
	r.writeExclusiveMarkdown(w)
	r.writeCohortsMarkdown(w)
	r.writeQueueingMarkdown(w)
	if r.showRows() {
		r.writeRowsMarkdown(w)
	} else if len(r.OnDemand) > 0 {
		fmt.Fprintf(w, "Per-state rows: %s.\n", r.statesWords())
	}
	r.writeAccessMarkdown(w)
	r.writeFindingsMarkdown(w)
	return nil
}

func (r *Report) writeRowsMarkdown(w io.Writer) {
	fmt.Fprintf(w, "<details><summary>Per service state (%d rows)</summary>\n\n", len(r.Capacity))
	head := []string{"template", "queue", "priority"}
	head = append(head, r.stateHeaders()...)
	head = append(head, "at once", "quota admits (binding)", "lock", "left", "with preemption")
	fmt.Fprintf(w, "| %s |\n", strings.Join(head, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat(" --- |", len(head)))
	for _, c := range r.Capacity {
		atOnce, quota, lock, left, preempt := r.cells(c)
		row := []string{"`" + c.Template + "`", c.Queue, fmt.Sprintf("%s (%d)", c.Priority, c.PriorityValue)}
		row = append(row, r.stateCells(c)...)
		row = append(row, "**"+atOnce+"**", quota, lock, left, preempt)
		for i := range row {
			row[i] = strings.ReplaceAll(row[i], "|", "\\|")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintf(w, "\n</details>\n\n")
}

// mdFindingsPerRule bounds the findings of one rule the markdown lists.
const mdFindingsPerRule = 10

func (r *Report) writeFindingsMarkdown(w io.Writer) {
	if len(r.Findings) == 0 {
		return
	}
	fmt.Fprintf(w, "\n#### Findings\n\n")
	perRule := map[string]int{}
	for _, f := range r.Findings {
		perRule[f.Rule]++
		if perRule[f.Rule] > mdFindingsPerRule {
			continue
		}
		where := "`" + f.Path + "`"
		if f.Pos != "" {
			where = "`" + f.Pos + "`"
		}
		fmt.Fprintf(w, "- **%s** `%s` %s: %s\n", f.Severity, f.Rule, where, strings.ReplaceAll(f.Message, "\n", " "))
	}
	var rules []string
	for rule, n := range perRule {
		if n > mdFindingsPerRule {
			rules = append(rules, rule)
		}
	}
	sort.Strings(rules)
	for _, rule := range rules {
		fmt.Fprintf(w, "- … and %d more `%s` findings (`-o json` lists every one)\n", perRule[rule]-mdFindingsPerRule, rule)
	}
}

// wrap breaks text into lines of at most width runes, at spaces.
func wrap(s string, width int) []string {
	var out []string
	var line strings.Builder
	line.Grow(width)
	n := 0 // runes in line
	for word := range strings.FieldsSeq(s) {
		w := utf8.RuneCountInString(word)
		if n > 0 && n+1+w > width {
			out = append(out, line.String())
			line = strings.Builder{}
			line.Grow(width)
			line.WriteString(word)
			n = w
			continue
		}
		if n > 0 {
			line.WriteByte(' ')
			n++
		}
		line.WriteString(word)
		n += w
	}
	if n > 0 {
		out = append(out, line.String())
	}
	return out
}
