package policy

import (
	"fmt"
	"strings"
)

// RuleNotModelled refuses the Kueue settings the admission model does not
// cover. The schema has no field for any of them, so a policy that writes
// one fails CUE's closed-struct check ("field not allowed"); fromCUE reports
// that error under this rule, with what Kueue does under the setting and
// why explain would be wrong, instead of as a schema typo.
var RuleNotModelled = vetRule("not-modelled",
	"fair sharing, topology-aware scheduling, DRA and MultiKueue change whom Kueue admits, in what order and where: explain models none of them, so its numbers would be wrong; a policy cannot state them until it does")

// unmodelledFeature is one Kueue feature the model does not cover: the
// field names a policy author would reach for, and what Kueue does
// differently under it.
type unmodelledFeature struct {
	// what names the feature and the Kueue setting it renders to.
	what string
	// why says, in the lab's words, what explain would get wrong.
	why string
	// fields are the names (compared without case, '-' or '_') that ask
	// for it, anywhere in the policy; scoped fields only directly under
	// one of scopes (queues.NAME, cards.NAME, ...).
	fields []string
	scoped []string
	scopes []string
}

// unmodelled lists the features. Each why cites the Kueue v0.17 code that
// the model would have to follow.
var unmodelled = []unmodelledFeature{
	{
		what: "Kueue fair sharing (ClusterQueue and Cohort fairSharing weights)",
		why: "with fair sharing Kueue orders a cohort's heads and picks whom to preempt by each ClusterQueue's weighted share of what it borrows " +
			"(pkg/scheduler/fair_sharing_iterator.go, pkg/scheduler/preemption/fairsharing), not by the classical preemption explain transcribes: " +
			"its admitted counts and eviction paths would be wrong",
		fields: []string{"fairSharing", "fairSharingWeight", "fairShare", "drf"},
		scoped: []string{"weight"},
		scopes: []string{"queues", "cohorts"},
	},
	{
		what: "Kueue admission fair sharing (ClusterQueue admissionScope, UsageBasedAdmissionFairSharing)",
		why: "with admission fair sharing Kueue orders a ClusterQueue's pending workloads by their LocalQueue's recent usage before priority and submission " +
			"(pkg/cache/queue/cluster_queue.go, queueOrderingFunc): explain's who-waits-behind-whom would be wrong",
		fields: []string{"admissionScope", "admissionMode", "admissionFairSharing", "usageBasedAdmissionFairSharing"},
	},
	{
		what: "topology-aware scheduling (ResourceFlavor topologyName, Topology levels, podset topology requests)",
		why: "with topology-aware scheduling Kueue admits a job only where one topology domain has room for its pods " +
			"(pkg/scheduler/flavorassigner/tas_flavorassigner.go), so a job that fits the quota can wait: explain counts quota alone",
		fields: []string{"topology", "topologies", "topologyName", "topologyAwareScheduling", "tas",
			"requiredTopology", "preferredTopology", "podsetRequiredTopology", "podsetPreferredTopology", "topologyRequest"},
	},
	{
		what: "dynamic resource allocation (DRA: DeviceClass, ResourceClaims, Kueue deviceClassMappings)",
		why: "with DRA a job asks its card through a ResourceClaim that Kueue counts through deviceClassMappings (pkg/dra), " +
			"not through the shares and GPU-memory declaration explain counts: its quota arithmetic would be wrong",
		fields: []string{"dra", "dynamicResourceAllocation", "deviceClass", "deviceClassName", "deviceClasses", "deviceClassMappings",
			"resourceClaim", "resourceClaims", "resourceClaimTemplate", "resourceClaimTemplates"},
	},
	{
		what: "MultiKueue (admission checks that dispatch Workloads to worker clusters)",
		why: "with MultiKueue a Workload that reserved quota here waits for its admission check and runs on a worker cluster " +
			"(pkg/controller/admissionchecks/multikueue): explain's count of what runs at once on this card would be wrong",
		fields: []string{"multiKueue", "multiKueueConfig", "multiKueueClusters", "workerClusters", "admissionChecks", "admissionChecksStrategy", "admissionCheck"},
	},
}

// fieldKey folds a field name for comparison: lower case, without '-' and
// '_'.
func fieldKey(s string) string {
	return strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(s))
}

// notModelled says why the field at path (CUE's error path, labels as CUE
// prints them) is refused by RuleNotModelled; false when the name asks for
// none of the unmodelled features.
func notModelled(path []string) (string, bool) {
	if len(path) == 0 {
		return "", false
	}
	name := fieldKey(unquote(path[len(path)-1]))
	for _, f := range unmodelled {
		hit := false
		for _, n := range f.fields {
			hit = hit || fieldKey(n) == name
		}
		if !hit && len(path) == 3 {
			for _, n := range f.scoped {
				for _, sc := range f.scopes {
					hit = hit || (fieldKey(n) == name && unquote(path[0]) == sc)
				}
			}
		}
		if hit {
			return fmt.Sprintf("%s is not modelled: %s; remove it (gpupolicy renders no such setting)", f.what, f.why), true
		}
	}
	return "", false
}
