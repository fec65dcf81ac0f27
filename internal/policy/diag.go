package policy

import (
	"fmt"
	"sort"
	"strings"
)

// Diagnostic is one problem found in a policy: where (file:line:col, relative
// to the current directory, or REV:path:line:col for a policy read from git),
// which rule (a stable ID such as "unknown-reference", or "schema" for a CUE
// constraint), and why, in the lab's words.
type Diagnostic struct {
	Pos     string `json:"pos"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

func (d Diagnostic) String() string {
	if d.Pos == "" {
		return fmt.Sprintf("%s: %s", d.Rule, d.Message)
	}
	return fmt.Sprintf("%s: %s: %s", d.Pos, d.Rule, d.Message)
}

// Diagnostics is a list of problems; as an error it is an input error
// (exit 2).
type Diagnostics []Diagnostic

func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

func (ds Diagnostics) sort() {
	sort.SliceStable(ds, func(i, j int) bool {
		if ds[i].Pos != ds[j].Pos {
			return posLess(ds[i].Pos, ds[j].Pos)
		}
		return ds[i].Message < ds[j].Message
	})
}

// posLess orders "file:line:col" by file, then numerically by line and column.
func posLess(a, b string) bool {
	fa, la, ca := splitPos(a)
	fb, lb, cb := splitPos(b)
	if fa != fb {
		return fa < fb
	}
	if la != lb {
		return la < lb
	}
	return ca < cb
}

func splitPos(p string) (file string, line, col int) {
	parts := strings.Split(p, ":")
	if len(parts) < 3 {
		return p, 0, 0
	}
	fmt.Sscanf(parts[len(parts)-2], "%d", &line)
	fmt.Sscanf(parts[len(parts)-1], "%d", &col)
	return strings.Join(parts[:len(parts)-2], ":"), line, col
}
