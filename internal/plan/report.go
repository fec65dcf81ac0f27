package plan

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/output"
)

// Formats are the formats plan prints, markdown (a pull-request comment,
// the default) first.
var Formats = []output.Format{output.Markdown, output.JSON, output.YAML, output.Text}

// Write prints the report in a format (output.Writer): markdown, json, yaml
// (the same document) or text.
func (r *Report) Write(w io.Writer, f output.Format) error {
	return output.Write(w, f, r.document(), r.Text, r.Markdown)
}

// JSON prints the report as indented JSON; lists are [] rather than null.
func (r *Report) JSON(w io.Writer) error { return output.WriteJSON(w, r.document()) }

// document is the report with its lists never null.
func (r *Report) document() *Report {
	out := *r
	if out.Locks == nil {
		out.Locks = []LockChange{}
	}
	if out.Admission == nil {
		out.Admission = []CapacityChange{}
	}
	if out.Access == nil {
		out.Access = []AccessChange{}
	}
	if out.FindingsAdded == nil {
		out.FindingsAdded = []finding.Finding{}
	}
	if out.FindingsCleared == nil {
		out.FindingsCleared = []finding.Finding{}
	}
	if out.FindingsChangedFrom == nil {
		out.FindingsChangedFrom = []finding.Finding{}
	}
	if out.FindingsChanged == nil {
		out.FindingsChanged = []finding.Finding{}
	}
	if out.Render == nil {
		out.Render = []drift.Difference{}
	}
	return &out
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
	if len(r.Locks) > 0 {
		fmt.Fprintln(w, "\nlock sizes it changes:")
		for _, c := range r.Locks {
			fmt.Fprintf(w, "  %s\n", c.Describe())
		}
	}
	fmt.Fprintln(w, "\nwhat it does to admission:")
	if len(r.Admission) == 0 {
		fmt.Fprintln(w, "  nothing: every template, priority and service state admits what it did")
	}
	for _, c := range r.Admission {
		fmt.Fprintf(w, "  %s (bound by %s → %s)\n", c.Describe(), bound(c.Base), bound(c.Head))
	}
	writeAccessText(w, r.Access)
	writeFindingsText(w, "findings added", r.FindingsAdded)
	writeFindingsText(w, "findings changed", r.FindingsChanged, r.FindingsChangedFrom...)
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

// writeFindingsText lists findings; was, when given, holds the base's
// version of each at the same index (a changed finding).
func writeFindingsText(w io.Writer, title string, fs []finding.Finding, was ...finding.Finding) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for i, f := range fs {
		fmt.Fprintf(w, "  %s %s: %s (%s)\n", f.Severity, f.Rule, f.Message, f.Path)
		if i < len(was) {
			fmt.Fprintf(w, "    was: %s\n", was[i].Message)
		}
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
	if len(r.Locks) > 0 {
		fmt.Fprintln(w, "### Locks")
		fmt.Fprintln(w)
		for _, c := range r.Locks {
			fmt.Fprintf(w, "- %s\n", mdEscape(c.Describe()))
		}
		fmt.Fprintln(w)
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
	writeAccessMarkdown(w, r.Access)
	if len(r.FindingsAdded)+len(r.FindingsChanged)+len(r.FindingsCleared) > 0 {
		fmt.Fprintln(w, "\n### Findings")
		writeFindingsMarkdown(w, "Added", r.FindingsAdded)
		writeFindingsMarkdown(w, "Changed", r.FindingsChanged, r.FindingsChangedFrom...)
		writeFindingsMarkdown(w, "Cleared", r.FindingsCleared)
	}
	fmt.Fprintf(w, "\n### Render\n\n%d differences.\n\n", len(r.Render))
	drift.WriteMarkdown(w, r.Render, Sides, false)
	return nil
}

func writeFindingsMarkdown(w io.Writer, title string, fs []finding.Finding, was ...finding.Finding) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n**%s**\n\n", title)
	for i, f := range fs {
		fmt.Fprintf(w, "- %s `%s`: %s (`%s`)\n", f.Severity, f.Rule, mdEscape(f.Message), mdEscape(f.Path))
		if i < len(was) {
			fmt.Fprintf(w, "  - was: %s\n", mdEscape(was[i].Message))
		}
	}
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
