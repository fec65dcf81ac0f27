package plan

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/admission"
)

// AccessChange is one namespace whose access rules, or whose paths to
// evict other namespaces' workloads, differ between the base and the head
// (admission.NamespaceAccess on each side).
type AccessChange struct {
	Namespace string `json:"namespace"`
	// BasePriorities and HeadPriorities are the priorities it may use on
	// each side, top first (empty where the namespace runs no GPU
	// workload); likewise the LocalQueues.
	BasePriorities  []string `json:"basePriorities"`
	HeadPriorities  []string `json:"headPriorities"`
	BaseLocalQueues []string `json:"baseLocalQueues"`
	HeadLocalQueues []string `json:"headLocalQueues"`
	// EvictsLost are the eviction paths Kueue can take at the base and not
	// at the head, EvictsGained the reverse, each in words
	// (admission.EvictionRight.Words).
	EvictsLost   []string `json:"evictsLost"`
	EvictsGained []string `json:"evictsGained"`
}

// Describe is "experiments: priorities training, on-demand-llm, batch →
// training, batch".
func (c AccessChange) Describe() string {
	list := func(s []string) string {
		if len(s) == 0 {
			return "none"
		}
		return strings.Join(s, ", ")
	}
	var parts []string
	if !slices.Equal(c.BasePriorities, c.HeadPriorities) {
		parts = append(parts, fmt.Sprintf("priorities %s → %s", list(c.BasePriorities), list(c.HeadPriorities)))
	}
	if !slices.Equal(c.BaseLocalQueues, c.HeadLocalQueues) {
		parts = append(parts, fmt.Sprintf("LocalQueues %s → %s", list(c.BaseLocalQueues), list(c.HeadLocalQueues)))
	}
	if len(parts) == 0 {
		parts = append(parts, "the same rights, other paths to evict")
	}
	return c.Namespace + ": " + strings.Join(parts, "; ")
}

// compareAccess lists the namespaces whose rights or possible eviction
// paths differ, in the order of the namespaces' names.
func compareAccess(base, head []admission.NamespaceAccess) []AccessChange {
	index := func(as []admission.NamespaceAccess) map[string]admission.NamespaceAccess {
		m := map[string]admission.NamespaceAccess{}
		for _, a := range as {
			m[a.Namespace] = a
		}
		return m
	}
	bm, hm := index(base), index(head)
	var names []string
	for _, as := range [][]admission.NamespaceAccess{base, head} {
		for _, a := range as {
			if !slices.Contains(names, a.Namespace) {
				names = append(names, a.Namespace)
			}
		}
	}
	slices.Sort(names)
	possible := func(a admission.NamespaceAccess) []string {
		out := []string{}
		for _, er := range a.Evicts {
			if er.Possible {
				out = append(out, er.Words())
			}
		}
		return out
	}
	minus := func(a, b []string) []string {
		out := []string{}
		for _, s := range a {
			if !slices.Contains(b, s) {
				out = append(out, s)
			}
		}
		return out
	}
	var out []AccessChange
	for _, n := range names {
		b, h := bm[n], hm[n]
		bp, hp := possible(b), possible(h)
		c := AccessChange{
			Namespace:      n,
			BasePriorities: append([]string{}, b.Priorities...), HeadPriorities: append([]string{}, h.Priorities...),
			BaseLocalQueues: append([]string{}, b.LocalQueues...), HeadLocalQueues: append([]string{}, h.LocalQueues...),
			EvictsLost: minus(bp, hp), EvictsGained: minus(hp, bp),
		}
		if slices.Equal(c.BasePriorities, c.HeadPriorities) && slices.Equal(c.BaseLocalQueues, c.HeadLocalQueues) &&
			len(c.EvictsLost)+len(c.EvictsGained) == 0 {
			continue
		}
		out = append(out, c)
	}
	return out
}

const accessHeading = "who may use what, and evict whom"

func writeAccessText(w io.Writer, cs []AccessChange) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", accessHeading)
	for _, c := range cs {
		fmt.Fprintf(w, "  %s\n", c.Describe())
		for _, s := range c.EvictsLost {
			fmt.Fprintf(w, "    no longer %s\n", s)
		}
		for _, s := range c.EvictsGained {
			fmt.Fprintf(w, "    now %s\n", s)
		}
	}
}

func writeAccessMarkdown(w io.Writer, cs []AccessChange) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### Access\n\nWho may use what (the API server enforces it), and evict whom through each ClusterQueue's preemption.\n\n")
	for _, c := range cs {
		fmt.Fprintf(w, "- **%s**\n", mdEscape(c.Describe()))
		for _, s := range c.EvictsLost {
			fmt.Fprintf(w, "  - no longer %s\n", mdEscape(s))
		}
		for _, s := range c.EvictsGained {
			fmt.Fprintf(w, "  - now %s\n", mdEscape(s))
		}
	}
}
