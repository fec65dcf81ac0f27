package render

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

var kueueAPIVersion = kueue.GroupVersion.String()

// resourceFlavor renders a card: Kueue's ResourceFlavor of the same name,
// whose nodeLabels Kueue injects into every pod it admits on the flavor.
func resourceFlavor(p *policy.Policy, c policy.Card) Object {
	rf := &kueue.ResourceFlavor{
		TypeMeta: metav1.TypeMeta{APIVersion: kueueAPIVersion, Kind: "ResourceFlavor"},
		ObjectMeta: meta(p, "", c.Name, map[string]string{
			AnnotationDescription: fmt.Sprintf("%s, %s, time-sliced into %s", c.Model,
				policy.FormatAmount(policy.GPUMemory, c.MemoryMiB), policy.FormatAmount(policy.Shares, c.Shares)),
		}),
		Spec: kueue.ResourceFlavorSpec{NodeLabels: c.NodeLabels},
	}
	return object(rf, []string{"cards", c.Name})
}

// clusterQueue renders a queue: one resource group covering shares, host
// memory and the GPU-memory declaration, with one flavor per card.
func clusterQueue(p *policy.Policy, q policy.ClusterQueue) Object {
	covered := []corev1.ResourceName{
		corev1.ResourceName(p.SharesResource()),
		corev1.ResourceMemory,
		corev1.ResourceName(p.DeclarationResource),
	}
	rg := kueue.ResourceGroup{CoveredResources: covered}
	for _, card := range q.FlavorNames() {
		f := q.Flavors[card]
		rg.Flavors = append(rg.Flavors, kueue.FlavorQuotas{
			Name: kueue.ResourceFlavorReference(card),
			Resources: []kueue.ResourceQuota{
				resourceQuota(covered[0], f.Shares, shares),
				resourceQuota(covered[1], f.HostMemory, hostMemory),
				resourceQuota(covered[2], f.GPUMemory, gpuMemory),
			},
		})
	}
	pre := &kueue.ClusterQueuePreemption{
		WithinClusterQueue:  kueue.PreemptionPolicy(q.Preemption.WithinClusterQueue),
		ReclaimWithinCohort: kueue.PreemptionPolicy(q.Preemption.ReclaimWithinCohort),
		BorrowWithinCohort:  &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicy(q.Preemption.BorrowWithinCohort)},
	}
	if th := q.Preemption.MaxPriorityThreshold; th != "" {
		v := p.Priorities[th].Value
		pre.BorrowWithinCohort.MaxPriorityThreshold = &v
	}
	cq := &kueue.ClusterQueue{
		TypeMeta: metav1.TypeMeta{APIVersion: kueueAPIVersion, Kind: "ClusterQueue"},
		ObjectMeta: meta(p, "", q.Name, map[string]string{
			AnnotationDescription: fmt.Sprintf("LocalQueue %s in %s", q.LocalQueue, strings.Join(q.Namespaces, ", ")),
		}),
		Spec: kueue.ClusterQueueSpec{
			CohortName: kueue.CohortReference(q.Cohort),
			// An empty selector matches every namespace; a nil one
			// matches none in Kueue. The LocalQueues decide who submits.
			NamespaceSelector: &metav1.LabelSelector{},
			QueueingStrategy:  kueue.BestEffortFIFO,
			ResourceGroups:    []kueue.ResourceGroup{rg},
			Preemption:        pre,
		},
	}
	return object(cq, []string{"queues", q.Name})
}

func resourceQuota(name corev1.ResourceName, q policy.Quota, qty func(int64) resource.Quantity) kueue.ResourceQuota {
	rq := kueue.ResourceQuota{Name: name, NominalQuota: qty(q.Nominal)}
	if q.BorrowingLimit != nil {
		v := qty(*q.BorrowingLimit)
		rq.BorrowingLimit = &v
	}
	if q.LendingLimit != nil {
		v := qty(*q.LendingLimit)
		rq.LendingLimit = &v
	}
	return rq
}

// localQueue renders the LocalQueue of a ClusterQueue in one namespace.
func localQueue(p *policy.Policy, q policy.ClusterQueue, namespace string) Object {
	lq := &kueue.LocalQueue{
		TypeMeta:   metav1.TypeMeta{APIVersion: kueueAPIVersion, Kind: "LocalQueue"},
		ObjectMeta: meta(p, namespace, q.LocalQueue, nil),
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(q.Name)},
	}
	return object(lq, []string{"queues", q.Name, "namespaces"})
}

// workloadPriorityClass renders one rung of the ladder.
func workloadPriorityClass(p *policy.Policy, pr policy.Priority) Object {
	wpc := &kueue.WorkloadPriorityClass{
		TypeMeta:    metav1.TypeMeta{APIVersion: kueueAPIVersion, Kind: "WorkloadPriorityClass"},
		ObjectMeta:  meta(p, "", pr.Name, nil),
		Value:       pr.Value,
		Description: pr.Description,
	}
	return object(wpc, []string{"priorities", pr.Name})
}

// Quantities. Kubernetes prints a quantity in its canonical form, so
// 1,024 MiB is written 1Gi; the amount is exact either way.

// shares is a count of time-slicing replicas.
func shares(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }

// hostMemory is "NGi" when whole gibibytes, else "NMi".
func hostMemory(mib int64) resource.Quantity {
	if mib%1024 == 0 {
		return resource.MustParse(fmt.Sprintf("%dGi", mib/1024))
	}
	return resource.MustParse(fmt.Sprintf("%dMi", mib))
}

// gpuMemory is a GPU-memory declaration, "NMi".
func gpuMemory(mib int64) resource.Quantity {
	return resource.MustParse(gpuMemoryString(mib))
}

func gpuMemoryString(mib int64) string { return fmt.Sprintf("%dMi", mib) }
