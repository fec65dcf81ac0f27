package render

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// resourceFlavor renders a card: Kueue's ResourceFlavor of the same name,
// whose nodeLabels Kueue injects into every pod it admits on the flavor.
func resourceFlavor(p *policy.Policy, c policy.Card) Object {
	rf := &kueue.ResourceFlavor{
		TypeMeta: metav1.TypeMeta{APIVersion: contract.KueueAPIVersion, Kind: "ResourceFlavor"},
		ObjectMeta: meta(p, "", c.Name, map[string]string{
			contract.AnnotationDescription: fmt.Sprintf("%s, %s, time-sliced into %s", c.Model,
				policy.FormatAmount(policy.GPUMemory, c.MemoryMiB), policy.FormatAmount(policy.Shares, c.Shares)),
		}),
		Spec: kueue.ResourceFlavorSpec{NodeLabels: c.NodeLabels},
	}
	return object(rf, []string{"cards", c.Name})
}

// clusterQueue renders a queue: one resource group covering shares, host
// memory and the GPU-memory declaration, with one flavor per card.
func clusterQueue(p *policy.Policy, q policy.ClusterQueue) Object {
	rg := quotaGroup(p, q.FlavorNames(), q.Flavors)
	pre := &kueue.ClusterQueuePreemption{
		WithinClusterQueue:  kueue.PreemptionPolicy(q.Preemption.WithinClusterQueue),
		ReclaimWithinCohort: kueue.PreemptionPolicy(q.Preemption.ReclaimWithinCohort),
		BorrowWithinCohort:  &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicy(q.Preemption.BorrowWithinCohort)},
	}
	if th := q.Preemption.MaxPriorityThreshold; th != "" {
		v := p.Priorities[th].Value
		pre.BorrowWithinCohort.MaxPriorityThreshold = &v
	}
	var fung *kueue.FlavorFungibility
	if q.FlavorFungibility != (policy.FlavorFungibility{}) {
		// Written only when the policy writes it: Kueue defaults it.
		f := q.Fungibility()
		fung = &kueue.FlavorFungibility{
			WhenCanBorrow:  kueue.FlavorFungibilityPolicy(f.WhenCanBorrow),
			WhenCanPreempt: kueue.FlavorFungibilityPolicy(f.WhenCanPreempt),
		}
	}
	cq := &kueue.ClusterQueue{
		TypeMeta: metav1.TypeMeta{APIVersion: contract.KueueAPIVersion, Kind: "ClusterQueue"},
		ObjectMeta: meta(p, "", q.Name, map[string]string{
			contract.AnnotationDescription: fmt.Sprintf("LocalQueue %s in %s", q.LocalQueue, strings.Join(q.Namespaces, ", ")),
		}),
		Spec: kueue.ClusterQueueSpec{
			CohortName: kueue.CohortReference(q.Cohort),
			// An empty selector matches every namespace; a nil one
			// matches none in Kueue. The LocalQueues decide who submits.
			NamespaceSelector: &metav1.LabelSelector{},
			QueueingStrategy:  kueue.QueueingStrategy(q.Strategy()),
			ResourceGroups:    []kueue.ResourceGroup{rg},
			Preemption:        pre,
			FlavorFungibility: fung,
		},
	}
	return object(cq, []string{"queues", q.Name})
}

// resourceQuota is one resource's quota, in Kubernetes units (a count of
// shares, host and GPU memory from MiB).
func resourceQuota(name corev1.ResourceName, k policy.Kind, q policy.Quota) kueue.ResourceQuota {
	rq := kueue.ResourceQuota{Name: name, NominalQuota: k.Quantity(q.Nominal)}
	if q.BorrowingLimit != nil {
		v := k.Quantity(*q.BorrowingLimit)
		rq.BorrowingLimit = &v
	}
	if q.LendingLimit != nil {
		v := k.Quantity(*q.LendingLimit)
		rq.LendingLimit = &v
	}
	return rq
}

// localQueue renders the LocalQueue of a ClusterQueue in one namespace.
func localQueue(p *policy.Policy, q policy.ClusterQueue, namespace string) Object {
	lq := &kueue.LocalQueue{
		TypeMeta:   metav1.TypeMeta{APIVersion: contract.KueueAPIVersion, Kind: "LocalQueue"},
		ObjectMeta: meta(p, namespace, q.LocalQueue, nil),
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(q.Name)},
	}
	return object(lq, []string{"queues", q.Name, "namespaces"})
}

// workloadPriorityClass renders one rung of the ladder.
func workloadPriorityClass(p *policy.Policy, pr policy.Priority) Object {
	wpc := &kueue.WorkloadPriorityClass{
		TypeMeta:    metav1.TypeMeta{APIVersion: contract.KueueAPIVersion, Kind: "WorkloadPriorityClass"},
		ObjectMeta:  meta(p, "", pr.Name, nil),
		Value:       pr.Value,
		Description: pr.Description,
	}
	return object(wpc, []string{"priorities", pr.Name})
}
