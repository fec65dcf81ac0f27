package verify

import (
	"maps"
	"slices"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// State is a service state: which on-demand services are up, as read from
// the cluster (see ReadState for the rule).
type State struct {
	// Services maps every on-demand service of the policy to "up" or
	// "down".
	Services map[string]string `json:"services"`
	// Evidence says, per on-demand service, what the state was read from.
	Evidence map[string]string `json:"evidence,omitempty"`
	// AlwaysOnAbsent lists the always-on services that hold no quota on
	// the cluster (a fresh local cluster runs none): the prediction is then
	// made without them, for the state actually observed.
	AlwaysOnAbsent []string `json:"alwaysOnAbsent,omitempty"`
	// Notes are what else was seen that the prediction assumes otherwise:
	// an always-on service that holds no quota, a service waiting for it.
	Notes []string `json:"notes,omitempty"`
}

// Up lists the services that are up, sorted.
func (s State) Up() []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(s.Services)) {
		if s.Services[n] == policy.ServiceUp {
			out = append(out, n)
		}
	}
	return out
}

// Label prints the state in the lab's words (policy.StateLabel): "qwen2-5-7b
// up", "all on-demand services down", "no on-demand services".
func (s State) Label() string {
	l := policy.StateLabel(s.Services)
	if len(s.AlwaysOnAbsent) > 0 {
		l += "; always-on " + strings.Join(s.AlwaysOnAbsent, ", ") + " holding no quota"
	}
	return l
}

// Same reports whether two states have the same services up (and the
// same always-on services absent).
func (s State) Same(o State) bool {
	return maps.Equal(s.Services, o.Services) && slices.Equal(s.AlwaysOnAbsent, o.AlwaysOnAbsent)
}

// Prediction is what the admission model predicts for the verify jobs in one
// service state.
type Prediction struct {
	// Template and Priority are the jobs' WorkflowTemplate and priority.
	Template string `json:"template"`
	Priority string `json:"priority"`
	// State is the service state the row is for.
	State map[string]string `json:"state"`
	// Admitted is how many run at once: min(QuotaAdmits, lock size).
	Admitted int `json:"admitted"`
	// QuotaAdmits is how many Kueue admits at once, locks aside.
	QuotaAdmits int `json:"quotaAdmits"`
	// BoundBy is "quota", "lock" or "never-fits".
	BoundBy string `json:"boundBy"`
	// Binding lists the resources that stop the next job.
	Binding []string `json:"binding,omitempty"`
	// Margin is what is left of each resource while Admitted jobs run
	// (Kubernetes quantities, e.g. "404Mi").
	Margin map[string]string `json:"margin,omitempty"`
	// Explain holds the admission model's starvation findings about the
	// priority, in its words.
	Explain []string `json:"explain,omitempty"`
	// Lock and LockSize are the step's smallest lock ("" and 0 without).
	Lock     string `json:"lock,omitempty"`
	LockSize int    `json:"lockSize,omitempty"`
	// Source names the model, e.g. "admission model (kueue v0.17)".
	Source string `json:"source,omitempty"`
	// WithoutAlwaysOn lists the always-on services the prediction was made
	// without, because the cluster showed them holding no quota.
	WithoutAlwaysOn []string `json:"withoutAlwaysOn,omitempty"`
}

// Why says in a phrase what limits the count: "the lock main (4)",
// "quota: nvidia.com/gpu, memory", "quota: gpupolicy.dev/gpu-memory".
func (p Prediction) Why() string {
	s := p.why()
	if len(p.WithoutAlwaysOn) > 0 {
		s += "; predicted without always-on " + strings.Join(p.WithoutAlwaysOn, ", ") + ", which held no quota"
		if p.QuotaAdmits != p.Admitted {
			s += ", so the queue admits " + itoa(p.QuotaAdmits)
		}
	}
	return s
}

func (p Prediction) why() string {
	switch p.BoundBy {
	case "lock":
		return "the lock " + p.Lock + " (" + itoa(p.LockSize) + ")"
	case "never-fits":
		return "a job's request exceeds what the queue can ever hold"
	}
	if len(p.Binding) == 0 {
		return "quota"
	}
	var parts []string
	for _, b := range p.Binding {
		if m, ok := p.Margin[b]; ok {
			parts = append(parts, b+" ("+m+" left)")
		} else {
			parts = append(parts, b)
		}
	}
	s := "quota: " + strings.Join(parts, ", ")
	if p.Lock != "" && p.LockSize == p.Admitted {
		s += "; the lock " + p.Lock + " (" + itoa(p.LockSize) + ") matches"
	}
	return s
}
