package admission

import "fmt"

// mostAtOnce says how many jobs of a template variant Kueue runs at once at
// most, over its component's reachable service states and every priority,
// for kueue-alone: "at most 4 at once, while qwen2-5-7b is down". A
// variant no reachable state has room for says so instead of a count of 0:
// "none without preemption: ... only by evicting others do up to 2 run,
// while ...", "none: no reachable service state leaves room for one of
// its jobs, at any priority, and no preemption makes room (see
// starvation)", or, when no state is reachable, "none: no service state
// is reachable (see service-unadmitted)".
func (e *explainer) mostAtOnce(vi int, v variant) string {
	comp := e.compOfVariant[vi]
	var most, mostPre int64
	mostAt, mostPreAt := "", ""
	reachable := 0
	for _, pr := range e.ladder {
		for _, k := range comp.scan {
			st := comp.states[k]
			if len(st.unadmitted) > 0 {
				continue
			}
			reachable++
			c := e.rowAt(comp, v, pr, st)
			if c.Admitted > most {
				most, mostAt = c.Admitted, e.stateWords(comp, st.up)
			}
			if c.Preemption != nil && c.Preemption.Admitted > mostPre {
				mostPre, mostPreAt = c.Preemption.Admitted, e.stateWords(comp, st.up)+", at priority "+pr.Name
			}
		}
	}
	switch {
	case most > 0:
		return fmt.Sprintf("at most %d at once, %s", most, mostAt)
	case reachable == 0:
		return "none: no service state is reachable (see service-unadmitted)"
	case mostPre > 0:
		return fmt.Sprintf("none without preemption: no reachable service state leaves room for one of its jobs; only by evicting others do up to %d run, %s", mostPre, mostPreAt)
	}
	return fmt.Sprintf("none: no reachable service state leaves room for one of its jobs (%s), at any priority, and no preemption makes room (see starvation)", e.requestWords(v.t.Request))
}
