package plan_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo/gittest"
	"github.com/gpupolicy/gpupolicy/internal/plan"
)

// A pull request that takes on-demand-llm away from experiments (the lab
// gives it training and every priority below by default): the plan shows
// the namespace's priorities before and after, the path by which models
// evict experiments' jobs now covering only what experiments may still
// run, the admission policy that now rejects on-demand-llm there, and the
// gpu-step template that no longer offers it.
func TestPlanRemovesAPriority(t *testing.T) {
	r := gittest.Init(t)
	base := commitLab(t, r, "", "lab")
	r.Write("policies/lab/access.cue", "package lab\n\n// experiments: no on-demand-llm.\naccess: experiments: priorities: [\"training\", \"batch\"]\n")
	r.Commit("access: experiments may not use on-demand-llm")
	g, err := gitrepo.Open(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := plan.Plan(plan.Options{Repo: g, Base: base, PolicyDir: "policies/lab"})
	if err != nil {
		t.Fatal(err)
	}
	byNS := map[string]plan.AccessChange{}
	for _, c := range rep.Access {
		byNS[c.Namespace] = c
	}
	exp, ok := byNS["experiments"]
	if !ok || !slices.Equal(exp.BasePriorities, []string{"training", "on-demand-llm", "batch"}) || !slices.Equal(exp.HeadPriorities, []string{"training", "batch"}) {
		t.Fatalf("experiments' access change: %+v (all: %+v)", exp, rep.Access)
	}
	if exp.Describe() != "experiments: priorities training, on-demand-llm, batch → training, batch" {
		t.Errorf("Describe() = %q", exp.Describe())
	}
	models := byNS["models"]
	if len(models.EvictsLost) != 1 || !strings.Contains(models.EvictsLost[0], "can evict the training, on-demand-llm and batch workloads of experiments") ||
		len(models.EvictsGained) != 1 || !strings.Contains(models.EvictsGained[0], "can evict the training and batch workloads of experiments") {
		t.Errorf("models' paths to experiments: lost %q, gained %q", models.EvictsLost, models.EvictsGained)
	}
	if _, ok := byNS["llm"]; ok {
		t.Errorf("llm changes: %+v", byNS["llm"])
	}
	var vap, template bool
	for _, d := range rep.Render {
		switch {
		case d.Kind == "ValidatingAdmissionPolicy" && d.Name == "gpupolicy-experiments" && strings.Contains(d.Path, "validations"):
			vap = vap || strings.Contains(d.From, "on-demand-llm") && !strings.Contains(d.To, "on-demand-llm")
		case d.Kind == "WorkflowTemplate" && d.Name == "gpu-step":
			template = template || strings.Contains(d.From, "on-demand-llm") && !strings.Contains(d.To, "on-demand-llm")
		}
	}
	if !vap || !template {
		t.Errorf("the render diff lacks the admission policy (%v) or the template's priorities (%v): %+v", vap, template, rep.Render)
	}
	var text, md bytes.Buffer
	if err := rep.Text(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "\nwho may use what, and evict whom:\n  experiments: priorities training, on-demand-llm, batch → training, batch\n") ||
		!strings.Contains(text.String(), "\n    no longer at always-on, can evict the training, on-demand-llm and batch workloads of experiments") {
		t.Errorf("text:\n%s", text.String())
	}
	if err := rep.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "\n### Access\n") || !strings.Contains(md.String(), "- **experiments: priorities training, on-demand-llm, batch → training, batch**\n") {
		t.Errorf("markdown:\n%s", md.String())
	}
}
