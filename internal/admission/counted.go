package admission

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// What Kueue v0.17 counts of a Workload that has no quota yet, and how a
// container that states a resource by its limit alone is counted. Kueue
// reads the Workload's pod sets (for a Job: the Job's pod template, which
// the API server does not default) and adjusts a copy before counting
// (pkg/workload/resources.go, AdjustResources):
//
//  1. handlePodLimitRange: each container without a request for a
//     resource gets the namespace LimitRange's container defaultRequest
//     for it, and one without a limit its default (MergeResourceListKeepFirst;
//     with several LimitRanges the first one's value, limitrange.Summarize);
//  2. handleLimitsToRequests: only then does a container still without a
//     request take its limit (UseLimitsAsMissingRequestsInPod).
//
// So a container that states 4,096 MiB by limit only, in a namespace whose
// LimitRange defaults requests to 1,024 MiB, is counted at 1,024 MiB
// (kubernetes-sigs/kueue#15020) — while its pod, once created, requests
// 4,096 MiB on the node: the API server defaults a Pod's missing request to
// its limit (SetDefaults_Pod in k8s.io/kubernetes pkg/apis/core/v1,
// deliberately not for pod templates) before admission, and the LimitRanger
// plugin only fills requests still missing (mergeContainerResources). A
// Workload made from a Pod (Argo's steps) therefore carries the request and
// is counted at the limit.
//
// Then workload.totalRequestsFromPodSets sums a pod's containers, takes
// init containers as the pod's peak and adds sidecars
// (component-helpers resource.PodRequests), times the pod set's count. Pod
// overhead (RuntimeClass, handlePodOverhead) is left out: it carries no
// GPU resource.

// LimitRangeDefaults are the container defaults of a namespace's
// LimitRanges.
type LimitRangeDefaults struct {
	// Default is the limit a container without one gets; DefaultRequest
	// the request.
	Default, DefaultRequest corev1.ResourceList
}

// ContainerDefaults summarizes a namespace's LimitRanges as Kueue does
// (limitrange.Summarize): for each resource, the first range (in the
// order given) with a Container item that sets it wins.
func ContainerDefaults(ranges []corev1.LimitRange) LimitRangeDefaults {
	d := LimitRangeDefaults{Default: corev1.ResourceList{}, DefaultRequest: corev1.ResourceList{}}
	keepFirst := func(dst, src corev1.ResourceList) {
		for k, v := range src {
			if _, ok := dst[k]; !ok {
				dst[k] = v.DeepCopy()
			}
		}
	}
	for _, r := range ranges {
		for _, item := range r.Spec.Limits {
			if item.Type == corev1.LimitTypeContainer {
				keepFirst(d.Default, item.Default)
				keepFirst(d.DefaultRequest, item.DefaultRequest)
			}
		}
	}
	return d
}

// Stated is how a Workload's pod sets state one resource and what Kueue
// v0.17 counts of it while the Workload has no quota.
type Stated struct {
	// Counted is what Kueue counts, every pod set × its count.
	Counted resource.Quantity
	// Stated is what the containers state themselves: their requests, and
	// the limits of containers with a limit and no request (× count).
	Stated resource.Quantity
	// ByRequest, ByLimitOnly and Unstated count the containers (over the
	// pod sets, once per pod set) that state it by a request, by a limit
	// alone, or not at all.
	ByRequest, ByLimitOnly, Unstated int
	// LimitOnly is what the limit-only containers state, LimitOnlyCounted
	// what Kueue counts of them (× count): the LimitRange's defaultRequest
	// when the namespace has one for the resource, else the limit.
	LimitOnly, LimitOnlyCounted resource.Quantity
}

// CountPodSets counts resource res over a Workload's pod sets as Kueue
// v0.17 does (see above), with the namespace's LimitRange defaults.
func CountPodSets(podSets []kueue.PodSet, res corev1.ResourceName, lr LimitRangeDefaults) Stated {
	var st Stated
	def, hasDef := lr.DefaultRequest[res]
	for _, ps := range podSets {
		count := int64(ps.Count)
		// counted and stated: a container's request as Kueue adjusts it,
		// and as the container states it.
		counted := func(c *corev1.Container) resource.Quantity {
			if q, ok := c.Resources.Requests[res]; ok {
				return q
			}
			if hasDef {
				return def
			}
			if q, ok := c.Resources.Limits[res]; ok {
				return q
			}
			if q, ok := lr.Default[res]; ok {
				return q // the LimitRange's default limit, then taken as the request
			}
			return resource.Quantity{}
		}
		stated := func(c *corev1.Container) resource.Quantity {
			if q, ok := c.Resources.Requests[res]; ok {
				return q
			}
			return c.Resources.Limits[res]
		}
		for i := range ps.Template.Spec.Containers {
			c := &ps.Template.Spec.Containers[i]
			_, hasReq := c.Resources.Requests[res]
			lim, hasLim := c.Resources.Limits[res]
			switch {
			case hasReq:
				st.ByRequest++
			case hasLim:
				st.ByLimitOnly++
				l, k := lim.DeepCopy(), counted(c)
				l.Mul(count)
				k.Mul(count)
				st.LimitOnly.Add(l)
				st.LimitOnlyCounted.Add(k)
			default:
				st.Unstated++
			}
		}
		k, s := podRequest(&ps.Template.Spec, counted), podRequest(&ps.Template.Spec, stated)
		k.Mul(count)
		s.Mul(count)
		st.Counted.Add(k)
		st.Stated.Add(s)
	}
	return st
}

// podRequest is component-helpers resource.PodRequests for one resource:
// the containers summed, restartable init containers (sidecars) added, and
// the pod's peak while each init container runs (it plus the sidecars
// started before it) taken when larger.
func podRequest(spec *corev1.PodSpec, reqOf func(*corev1.Container) resource.Quantity) resource.Quantity {
	var sum, sidecars, peak resource.Quantity
	for i := range spec.Containers {
		sum.Add(reqOf(&spec.Containers[i]))
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		q := reqOf(c)
		use := sidecars.DeepCopy()
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum.Add(q)
			sidecars.Add(q)
			use = sidecars.DeepCopy()
		} else {
			use.Add(q)
		}
		if use.Cmp(peak) > 0 {
			peak = use
		}
	}
	if peak.Cmp(sum) > 0 {
		return peak
	}
	return sum
}
