package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/admission"
)

// Formats are the report formats.
var Formats = []string{"markdown", "json", "text"}

// Write prints the report: markdown (a pull-request comment), json or text.
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case "markdown", "md", "":
		return r.Markdown(w)
	case "json":
		return r.JSON(w)
	case "text":
		return r.Text(w)
	}
	return fmt.Errorf("unknown output format %q (markdown, json or text)", format)
}

// JSON prints the report as indented JSON; lists are [] rather than null.
func (r *Report) JSON(w io.Writer) error {
	out := *r
	if out.Admission == nil {
		out.Admission = []CapacityChange{}
	}
	if out.FindingsAdded == nil {
		out.FindingsAdded = []admission.Finding{}
	}
	if out.FindingsCleared == nil {
		out.FindingsCleared = []admission.Finding{}
	}
	if out.FindingsChanged == nil {
		out.FindingsChanged = []admission.Finding{}
	}
	if out.Render == nil {
		out.Render = []drift.Difference{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

func (r *Report) baseWords() string {
	s := fmt.Sprintf("%s (%s)", r.Base.Commit.Short(), r.Base.Commit.Subject)
	if r.Base.Missing != "" {
		s += ", where the policy is missing: " + r.Base.Missing
	}
	return s
}

// Text prints the report for a terminal.
func (r *Report) Text(w io.Writer) error {
	fmt.Fprintf(w, "plan for %s (policy %s)\n  base: %s\n  head: %s (%s)\n",
		r.PolicyDir, r.Policy, r.baseWords(), r.Head.Commit.Short(), r.Head.Commit.Subject)
	if !r.Changed() {
		fmt.Fprintln(w, "\nno change: the head renders exactly what the base does")
		return nil
	}
	fmt.Fprintln(w, "\nwhat it does to admission:")
	if len(r.Admission) == 0 {
		fmt.Fprintln(w, "  nothing: every template, priority and service state admits what it did")
	}
	for _, c := range r.Admission {
		fmt.Fprintf(w, "  %s (bound by %s → %s)\n", c.Describe(), bound(c.Base), bound(c.Head))
	}
	writeFindingsText(w, "findings added", r.FindingsAdded)
	writeFindingsText(w, "findings changed", r.FindingsChanged)
	writeFindingsText(w, "findings cleared", r.FindingsCleared)
	fmt.Fprintf(w, "\nwhat changed in the render (%d differences):\n\n", len(r.Render))
	drift.WriteText(w, r.Render, Sides, false)
	return nil
}

// jobs is how many run at once: "4", or "0 (4 by preemption)" when
// preemption admits more.
func jobs(o *Outcome) string {
	if o == nil {
		return "none (no such row)"
	}
	if o.Preempting > o.Admitted {
		return fmt.Sprintf("%d (%d by preemption)", o.Admitted, o.Preempting)
	}
	return fmt.Sprint(o.Admitted)
}

func bound(o *Outcome) string {
	if o == nil {
		return "-"
	}
	return o.Bound
}

func writeFindingsText(w io.Writer, title string, fs []admission.Finding) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, f := range fs {
		fmt.Fprintf(w, "  %s %s: %s (%s)\n", f.Severity, f.Rule, f.Message, f.Path)
	}
}

// Markdown prints the report as a pull-request comment.
func (r *Report) Markdown(w io.Writer) error {
	fmt.Fprintf(w, "## gpupolicy plan: `%s`\n\n", r.PolicyDir)
	fmt.Fprintf(w, "Base `%s` (%s) → head `%s` (%s).\n\n",
		r.Base.Commit.Short(), mdEscape(r.Base.Commit.Subject), r.Head.Commit.Short(), mdEscape(r.Head.Commit.Subject))
	if r.Base.Missing != "" {
		fmt.Fprintf(w, "The base has no usable policy: %s.\n\n", mdEscape(r.Base.Missing))
	}
	if !r.Changed() {
		fmt.Fprintln(w, "**No change**: the head renders exactly what the base does.")
		return nil
	}
	fmt.Fprintln(w, "### Admission")
	fmt.Fprintln(w)
	if len(r.Admission) == 0 {
		fmt.Fprintln(w, "No change: every template, priority and service state admits what it did.")
	} else {
		fmt.Fprintln(w, "| Jobs of | At priority | When | Jobs at once | Bound by |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
		for _, c := range r.Admission {
			fmt.Fprintf(w, "| %s | %s | %s | %s → **%s** | %s → %s |\n",
				c.Template, c.Priority, c.State, jobs(c.Base), jobs(c.Head), mdEscape(bound(c.Base)), mdEscape(bound(c.Head)))
		}
	}
	if len(r.FindingsAdded)+len(r.FindingsChanged)+len(r.FindingsCleared) > 0 {
		fmt.Fprintln(w, "\n### Findings")
		writeFindingsMarkdown(w, "Added", r.FindingsAdded)
		writeFindingsMarkdown(w, "Changed", r.FindingsChanged)
		writeFindingsMarkdown(w, "Cleared", r.FindingsCleared)
	}
	fmt.Fprintf(w, "\n### Render\n\n%d differences.\n\n", len(r.Render))
	drift.WriteMarkdown(w, r.Render, Sides, false)
	return nil
}

func writeFindingsMarkdown(w io.Writer, title string, fs []admission.Finding) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n**%s**\n\n", title)
	for _, f := range fs {
		fmt.Fprintf(w, "- %s `%s`: %s (`%s`)\n", f.Severity, f.Rule, mdEscape(f.Message), mdEscape(f.Path))
	}
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
