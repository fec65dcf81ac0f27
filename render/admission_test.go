package render

import (
	"os"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// The README's Kueue configuration fragment is the lab's render of it.
func TestKueueConfigFragmentInREADME(t *testing.T) {
	p, err := policy.Load("../policies/lab")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "<!-- kueue-config:lab -->\n```yaml\n" + KueueConfigFragment(p) + "```\n<!-- /kueue-config:lab -->"
	if !strings.Contains(string(b), want) {
		t.Errorf("README.md lacks the lab's Kueue fragment:\n%s", want)
	}
}

// The WorkflowTemplates offer only the priorities their namespace may use,
// and each GPU namespace gets its admission policy and binding.
func TestAdmissionObjects(t *testing.T) {
	p, err := policy.Load("../policies/lab")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	wt := string(r.Files["workflowtemplate_experiments_gpu-step.yaml"])
	if strings.Contains(wt, "always-on") || !strings.Contains(wt, "- batch") {
		t.Errorf("gpu-step offers priorities experiments may not use:\n%s", wt)
	}
	for _, ns := range p.GPUNamespaces() {
		for _, f := range []string{"validatingadmissionpolicy_gpupolicy-" + ns + ".yaml", "validatingadmissionpolicybinding_gpupolicy-" + ns + ".yaml"} {
			if _, ok := r.Files[f]; !ok {
				t.Errorf("%s not rendered", f)
			}
		}
	}
	vap := string(r.Files["validatingadmissionpolicy_gpupolicy-models.yaml"])
	if !strings.Contains(vap, `variables.priority in ["always-on"]`) {
		t.Errorf("models may use only always-on:\n%s", vap)
	}
}
