package render_test

import (
	"slices"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// The contract's API versions are the ones of the typed objects render
// writes, and its default declaration resource is the schema's.
func TestContractMatchesWhatRenderWrites(t *testing.T) {
	if contract.KueueAPIVersion != kueue.GroupVersion.String() || contract.GVRClusterQueue.GroupVersion() != kueue.GroupVersion {
		t.Errorf("Kueue: contract %s, kueue apis %s", contract.KueueAPIVersion, kueue.GroupVersion)
	}
	if contract.ArgoAPIVersion != wfv1.SchemeGroupVersion.String() || contract.GVRWorkflowTemplate.GroupVersion() != wfv1.SchemeGroupVersion {
		t.Errorf("Argo: contract %s, argo apis %s", contract.ArgoAPIVersion, wfv1.SchemeGroupVersion)
	}
	p, err := policy.Load("../policies/lab") // names no declarationResource
	if err != nil {
		t.Fatal(err)
	}
	if p.DeclarationResource != contract.DefaultDeclarationResource {
		t.Errorf("the schema's default declaration resource is %s, the contract's %s", p.DeclarationResource, contract.DefaultDeclarationResource)
	}
}

// With the device plugin's renameByDefault on, the nodes advertise the
// shares as nvidia.com/gpu.shared. Render's quotas and requests and
// explain's binding resources and margins must name the same resource, or
// explain describes quota nothing on the node satisfies.
func TestRenameByDefaultExplainAndRenderAgree(t *testing.T) {
	p := admissiontest.Lab().Obj()
	p.DevicePlugin.RenameByDefault = true
	const shares = "nvidia.com/gpu.shared"

	r, err := render.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	rendered := map[string]bool{} // every resource render's ClusterQueues cover
	for _, o := range r.Objects {
		switch obj := o.Obj.(type) {
		case *kueue.ClusterQueue:
			for _, rg := range obj.Spec.ResourceGroups {
				for _, res := range rg.CoveredResources {
					rendered[string(res)] = true
				}
				for _, f := range rg.Flavors {
					for _, rq := range f.Resources {
						if !slices.Contains(rg.CoveredResources, rq.Name) {
							t.Errorf("ClusterQueue %s: quota for %s, which it does not cover", o.Name, rq.Name)
						}
					}
				}
			}
		case *wfv1.WorkflowTemplate:
			for _, tmpl := range obj.Spec.Templates {
				if tmpl.Container == nil {
					continue
				}
				if _, ok := tmpl.Container.Resources.Requests[corev1.ResourceName(shares)]; !ok {
					t.Errorf("WorkflowTemplate %s requests %v, not %s", o.Name, tmpl.Container.Resources.Requests, shares)
				}
			}
		}
	}
	if !rendered[shares] || rendered[policy.ResourceShares] {
		t.Fatalf("render covers %v; want %s and not %s", rendered, shares, policy.ResourceShares)
	}

	rep, err := admission.Explain(p)
	if err != nil {
		t.Fatal(err)
	}
	sawShares := false
	for _, c := range rep.Capacity {
		var named []string
		named = append(named, c.Binding...)
		for res := range c.Margin {
			named = append(named, res)
		}
		for res := range c.PerResource {
			named = append(named, res)
		}
		if c.Preemption != nil {
			for res := range c.Preemption.Margin {
				named = append(named, res)
			}
		}
		for _, res := range named {
			if !rendered[res] {
				t.Errorf("explain row %s/%s names %s, which render's ClusterQueues do not cover (%v)", c.Template, c.Priority, res, rendered)
			}
			sawShares = sawShares || res == shares
		}
	}
	if !sawShares {
		t.Errorf("explain never names %s", shares)
	}
}
