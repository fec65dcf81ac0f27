package admission

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// requestText prints an exclusive step's request: "4 shares, 8,192 MiB
// host memory, 12,604 MiB GPU memory" (by resource name for a report read
// back from JSON).
func (x Exclusive) requestText() string {
	if x.requestWords != "" {
		return x.requestWords
	}
	keys := make([]string, 0, len(x.Request))
	for k := range x.Request {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = x.Request[k] + " " + k
	}
	return strings.Join(parts, ", ")
}

// headline is the template's one line: what it asks, at what priority, and
// whether it runs alone.
func (x Exclusive) headline() string {
	alone := "Kueue admits nothing else beside it"
	if !x.Alone {
		alone = "NOT alone: Kueue admits others beside it too (finding exclusive-alone)"
	}
	checked := ""
	if int64(x.StatesChecked) != x.StatesTotal {
		checked = fmt.Sprintf(" (%d of %d service states checked)", x.StatesChecked, x.StatesTotal)
	}
	return fmt.Sprintf("%s (ClusterQueue %s, %s priority, jobs: %s) asks %s, every share and all the GPU memory the always-on services leave (they keep their own quota and run beside it): %s%s",
		x.Template, x.Queue, x.Priority, x.Jobs, x.requestText(), alone, checked)
}

// exclusiveTitle heads the exclusive templates' section.
const exclusiveTitle = "Exclusive templates (the card to itself by quota)"

// writeExclusiveText writes the exclusive templates' section, if any.
func (r *Report) writeExclusiveText(w io.Writer) {
	if len(r.Exclusive) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", exclusiveTitle)
	for _, x := range r.Exclusive {
		for i, line := range wrap(x.headline(), 86) {
			fmt.Fprintf(w, "  %s%s\n", strings.Repeat("  ", min(i, 1)), line)
		}
		for _, s := range x.Words {
			for i, line := range wrap(s, 84) {
				fmt.Fprintf(w, "    %s%s\n", strings.Repeat("  ", min(i, 1)), line)
			}
		}
	}
}

// writeExclusiveMarkdown writes the exclusive templates' section, if any.
func (r *Report) writeExclusiveMarkdown(w io.Writer) {
	if len(r.Exclusive) == 0 {
		return
	}
	fmt.Fprintf(w, "#### %s\n\n", exclusiveTitle)
	for _, x := range r.Exclusive {
		fmt.Fprintf(w, "- `%s` %s\n", x.Template, strings.TrimPrefix(x.headline(), x.Template+" "))
		for _, s := range x.Words {
			fmt.Fprintf(w, "  - %s\n", s)
		}
	}
	fmt.Fprintln(w)
}

// StateOf returns an exclusive template's analysis in one service
// state (every on-demand service named in up is up, the others down).
func (x Exclusive) StateOf(up ...string) (ExclusiveState, bool) {
	for _, st := range x.States {
		match := true
		for n, s := range st.State {
			if (s == policy.ServiceUp) != slices.Contains(up, n) {
				match = false
				break
			}
		}
		if match {
			return st, true
		}
	}
	return ExclusiveState{}, false
}
