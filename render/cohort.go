package render

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// cohort renders a declared Cohort as Kueue's v1beta2 Cohort: its parent
// (spec.parentName) and its own quota, one resource group covering shares,
// host memory and the GPU-memory declaration with one flavor per card, as
// a ClusterQueue's. A cohort without quota renders without
// resourceGroups; its ClusterQueues name it in cohortName as before.
func cohort(p *policy.Policy, c policy.Cohort) Object {
	desc := "cohort root"
	if c.Parent != "" {
		desc = "child of cohort " + c.Parent
	}
	var queues []string
	for _, n := range p.QueueNames() {
		if p.Queues[n].Cohort == c.Name {
			queues = append(queues, n)
		}
	}
	if len(queues) > 0 {
		desc += "; ClusterQueues " + strings.Join(queues, ", ")
	}
	if c.Description != "" {
		desc = c.Description + " (" + desc + ")"
	}
	co := &kueue.Cohort{
		TypeMeta:   metav1.TypeMeta{APIVersion: contract.KueueAPIVersion, Kind: "Cohort"},
		ObjectMeta: meta(p, "", c.Name, map[string]string{contract.AnnotationDescription: desc}),
		Spec:       kueue.CohortSpec{ParentName: kueue.CohortReference(c.Parent)},
	}
	if len(c.Flavors) > 0 {
		co.Spec.ResourceGroups = []kueue.ResourceGroup{quotaGroup(p, c.FlavorNames(), c.Flavors)}
	}
	return object(co, []string{"cohorts", c.Name})
}

// quotaGroup is one Kueue resource group covering the policy's three
// resources (policy.Kinds, named by policy.Resource), with one flavor per
// card in cards' order, each quota in Kubernetes units (resourceQuota).
func quotaGroup(p *policy.Policy, cards []string, flavors map[string]policy.FlavorQuotas) kueue.ResourceGroup {
	var covered []corev1.ResourceName
	for _, k := range policy.Kinds {
		covered = append(covered, corev1.ResourceName(p.Resource(k)))
	}
	rg := kueue.ResourceGroup{CoveredResources: covered}
	for _, card := range cards {
		f := flavors[card]
		fq := kueue.FlavorQuotas{Name: kueue.ResourceFlavorReference(card)}
		for i, k := range policy.Kinds {
			fq.Resources = append(fq.Resources, resourceQuota(covered[i], k, f.Get(k)))
		}
		rg.Flavors = append(rg.Flavors, fq)
	}
	return rg
}
