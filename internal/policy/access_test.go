package policy_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

func lab(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.Load("../../policies/lab")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The defaults users expect: a job namespace gets its templates' default
// priority and those below; a service namespace its services' priorities;
// each namespace the queues with a LocalQueue there.
func TestAllowedDefaults(t *testing.T) {
	p := lab(t)
	for ns, want := range map[string][]string{
		"experiments": {"training", "on-demand-llm", "batch"},
		"models":      {"always-on"},
		"llm":         {"on-demand-llm"},
	} {
		r := p.Allowed(ns)
		if !slices.Equal(r.Priorities, want) || !r.PrioritiesDefault {
			t.Errorf("%s priorities = %v (default %v), want %v", ns, r.Priorities, r.PrioritiesDefault, want)
		}
	}
	if r := p.Allowed("experiments"); !slices.Equal(r.LocalQueues, []string{"gpu-general"}) || r.MayUseLocalQueue("gpu-large-model") {
		t.Errorf("experiments LocalQueues = %v", r.LocalQueues)
	}
}

// A stated right replaces the default; one that leaves out a template's own
// default priority, or names an unknown one, is a vet error.
func TestAllowedStated(t *testing.T) {
	p := lab(t)
	p.Access = map[string]policy.Access{"experiments": {Namespace: "experiments", Priorities: []string{"batch", "training"}, PrioritiesStated: true}}
	if r := p.Allowed("experiments"); !slices.Equal(r.Priorities, []string{"training", "batch"}) || r.PrioritiesDefault {
		t.Errorf("stated priorities = %v", r.Priorities)
	}
	if fs := p.Check(); len(fs) != 0 {
		t.Errorf("a consistent access is flagged: %v", fs)
	}
	p.Access["experiments"] = policy.Access{Namespace: "experiments", Priorities: []string{"batch", "nope"}, PrioritiesStated: true}
	msgs := ""
	for _, f := range p.Check() {
		msgs += f.Rule + ": " + f.Message + "\n"
	}
	for _, want := range []string{"unknown-reference", `leaves out "training", the default priority of template gpu-step`} {
		if !strings.Contains(msgs, want) {
			t.Errorf("vet = %q, want %q", msgs, want)
		}
	}
}

// AllowedEach, one pass over the policy for every namespace, answers what
// Allowed answers for each (the lab, the department policy, and the lab
// with an access stated).
func TestAllowedEach(t *testing.T) {
	dept, err := policy.Load("../../policies/department")
	if err != nil {
		t.Fatal(err)
	}
	stated := lab(t)
	stated.Access = map[string]policy.Access{"experiments": {Namespace: "experiments", Priorities: []string{"batch", "training"}, PrioritiesStated: true}}
	for name, p := range map[string]*policy.Policy{"lab": lab(t), "department": dept, "lab, access stated": stated} {
		each := p.AllowedEach()
		if len(each) != len(p.GPUNamespaces()) || len(each) == 0 {
			t.Errorf("%s: AllowedEach has %d namespaces, GPUNamespaces %d", name, len(each), len(p.GPUNamespaces()))
		}
		for _, ns := range p.GPUNamespaces() {
			if got, want := each[ns], p.Allowed(ns); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: AllowedEach()[%s] = %+v, Allowed = %+v", name, ns, got, want)
			}
		}
	}
	if got := lab(t).AllowedEach()["experiments"].Priorities; !slices.Equal(got, []string{"training", "on-demand-llm", "batch"}) {
		t.Errorf("lab experiments priorities = %v", got)
	}
}
