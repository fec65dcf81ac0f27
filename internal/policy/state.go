package policy

import (
	"sort"
	"strings"
)

// A service state maps every on-demand service to ServiceUp or ServiceDown
// (always-on services are always up).
const (
	ServiceUp   = "up"
	ServiceDown = "down"
)

// StateLabel prints a service state in the lab's words: "qwen2-5-7b up",
// "a up, b down" (services by name), "all on-demand services down" when
// there are several and none is up, "no on-demand services" for an empty
// state.
func StateLabel(state map[string]string) string {
	if len(state) == 0 {
		return "no on-demand services"
	}
	names := make([]string, 0, len(state))
	anyUp := false
	for n, s := range state {
		names = append(names, n)
		anyUp = anyUp || s == ServiceUp
	}
	if !anyUp && len(names) > 1 {
		return "all on-demand services down"
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + " " + state[n]
	}
	return strings.Join(parts, ", ")
}
