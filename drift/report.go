package drift

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/output"
)

// Formats are the formats drift prints.
var Formats = output.All

// Write prints the report in a format (output.Writer): text, json, yaml
// (the same document) or markdown.
func (r *Report) Write(w io.Writer, f output.Format) error {
	return output.Write(w, f, r.document(), r.Text, r.Markdown)
}

// JSON prints the report as indented JSON.
func (r *Report) JSON(w io.Writer) error { return output.WriteJSON(w, r.document()) }

// document is the report with its lists never null.
func (r *Report) document() *Report {
	out := *r
	if out.Differences == nil {
		out.Differences = []Difference{}
	}
	if out.Findings == nil {
		out.Findings = []finding.Finding{}
	}
	return &out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// behindLine says how far the pin is behind HEAD.
func (r *Report) behindLine() string {
	if r.Pin.Commit.Hash == r.Head.Commit.Hash {
		return "the pin is HEAD"
	}
	if !r.PinIsAncestor {
		return fmt.Sprintf("the pin is not on HEAD's history; HEAD has %s the pin lacks, %s what %s deploys",
			plural(r.Behind, "commit", "commits"), changingWord(r.BehindRender), r.Environment)
	}
	return fmt.Sprintf("the pin is %s behind HEAD in what %s deploys (%s in all)",
		plural(r.BehindRender, "commit", "commits"), r.Environment, plural(r.Behind, "commit", "commits"))
}

func changingWord(n int) string {
	if n == 1 {
		return "1 of which changes"
	}
	return fmt.Sprintf("%d of which change", n)
}

// Text prints the report for a terminal.
func (r *Report) Text(w io.Writer) error {
	fmt.Fprintf(w, "environment %s: %s\n", r.Environment, r.behindLine())
	fmt.Fprintf(w, "  pin:  %s\n        from %s\n", r.Pin.Commit, r.Pin.Source)
	fmt.Fprintf(w, "  HEAD: %s\n        from %s\n", r.Head.Commit, r.Head.Source)
	if r.StaleRender != nil {
		fmt.Fprintf(w, "warning: %s\n", r.StaleRender.line(r.Environment, r.Head.Source))
	}
	if !r.Drifted() {
		fmt.Fprintf(w, "no drift: the render at the pin matches HEAD\n")
		return nil
	}
	fmt.Fprintln(w)
	WriteText(w, r.Differences, GitSides, true)
	fmt.Fprintf(w, "\ndrift: %s in %s; move the pin with: gpupolicy pin --env %s\n",
		plural(len(r.Differences), "difference", "differences"), plural(CountObjects(r.Differences), "object", "objects"), r.Environment)
	return nil
}

// WriteText prints differences grouped by object, each with its values on
// both sides, the commit that introduced the newer value (when blame is
// set) and its consequence (once per object when several share it).
func WriteText(w io.Writer, ds []Difference, sides Sides, blame bool) {
	width := len(sides.From)
	if len(sides.To) > width {
		width = len(sides.To)
	}
	label := func(s string) string { return fmt.Sprintf("%-*s", width+1, s+":") }
	var obj, lastIntro string
	said := map[string]bool{}
	for _, d := range ds {
		if d.Object() != obj {
			if obj != "" {
				fmt.Fprintln(w)
			}
			obj, lastIntro = d.Object(), ""
			said = map[string]bool{}
			fmt.Fprintf(w, "%s (%s)\n", obj, d.File)
		}
		switch d.Change {
		case Added:
			fmt.Fprintf(w, "  missing at %s (only %s has it)\n", sides.From, sides.To)
		case Removed:
			fmt.Fprintf(w, "  only at %s (%s does not have it)\n", sides.From, sides.To)
		default:
			fmt.Fprintf(w, "  %s\n", d.Path)
			fmt.Fprintf(w, "    %s %s\n", label(sides.From), valueText(d.From))
			fmt.Fprintf(w, "    %s %s\n", label(sides.To), valueText(d.To))
		}
		// The commit that brought the value, once for a run of
		// differences it brought together.
		if blame && d.Introduced != nil && d.Introduced.Hash != lastIntro {
			lastIntro = d.Introduced.Hash
			date := d.Introduced.Date
			if len(date) > 10 {
				date = date[:10]
			}
			fmt.Fprintf(w, "    introduced by %s (%s, %s)\n", d.Introduced, d.Introduced.Author, date)
		}
		if d.Consequence != "" && !said[d.Consequence] {
			said[d.Consequence] = true
			fmt.Fprintf(w, "    => %s\n", d.Consequence)
		}
	}
}

func valueText(v string) string {
	if v == "" {
		return "(absent)"
	}
	return v
}

// CountObjects counts the objects differences touch.
func CountObjects(ds []Difference) int {
	seen := map[string]bool{}
	for _, d := range ds {
		seen[d.Object()] = true
	}
	return len(seen)
}

// Markdown prints the report for a scheduled report or an issue.
func (r *Report) Markdown(w io.Writer) error {
	fmt.Fprintf(w, "## Drift: %s\n\n", r.Environment)
	fmt.Fprintf(w, "Pin `%s` (%s) against HEAD `%s` (%s): %s.\n\n",
		r.Pin.Commit.Short(), mdEscape(r.Pin.Commit.Subject), r.Head.Commit.Short(), mdEscape(r.Head.Commit.Subject), r.behindLine())
	fmt.Fprintf(w, "- pin: %s\n- HEAD: %s\n\n", r.Pin.Source, r.Head.Source)
	if r.StaleRender != nil {
		fmt.Fprintf(w, "**Warning**: %s.\n\n", mdEscape(r.StaleRender.line(r.Environment, r.Head.Source)))
	}
	if !r.Drifted() {
		fmt.Fprintf(w, "**No drift**: the render at the pin matches HEAD.\n")
		return nil
	}
	fmt.Fprintf(w, "**Drift**: %s in %s.\n\n", plural(len(r.Differences), "difference", "differences"), plural(CountObjects(r.Differences), "object", "objects"))
	WriteMarkdown(w, r.Differences, GitSides, true)
	fmt.Fprintf(w, "\nMove the pin with `gpupolicy pin --env %s`.\n", r.Environment)
	return nil
}

// WriteMarkdown prints differences as a table and their consequences as a
// list below it.
func WriteMarkdown(w io.Writer, ds []Difference, sides Sides, blame bool) {
	head := fmt.Sprintf("| Object | Field | %s | %s |", capitalize(sides.From), capitalize(sides.To))
	rule := "| --- | --- | --- | --- |"
	if blame {
		head += " Introduced by |"
		rule += " --- |"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	for _, d := range ds {
		field, from, to := "`"+mdEscape(d.Path)+"`", mdValue(d.From), mdValue(d.To)
		switch d.Change {
		case Added:
			field, from, to = "_whole object_", "_missing_", "present"
		case Removed:
			field, from, to = "_whole object_", "present", "_missing_"
		}
		row := fmt.Sprintf("| %s | %s | %s | %s |", d.Object(), field, from, to)
		if blame {
			intro := ""
			if d.Introduced != nil {
				intro = fmt.Sprintf("`%s` %s", d.Introduced.Short(), mdEscape(d.Introduced.Subject))
			}
			row += " " + intro + " |"
		}
		fmt.Fprintln(w, row)
	}
	var lines []string
	said := map[string]bool{}
	for _, d := range ds {
		if d.Consequence == "" || said[d.Consequence] {
			continue
		}
		said[d.Consequence] = true
		lines = append(lines, fmt.Sprintf("- **%s**: %s", d.Object(), mdEscape(d.Consequence)))
	}
	if len(lines) > 0 {
		fmt.Fprintf(w, "\n**What it changes**\n\n%s\n", strings.Join(lines, "\n"))
	}
}

func mdValue(v string) string {
	if v == "" {
		return "_absent_"
	}
	return "`" + mdEscape(cut(v, 80)) + "`"
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "`", "'")
}
