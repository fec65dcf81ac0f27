// Package admission is the admission model of a gpupolicy policy: what Kueue
// (v0.17, classical preemption, no fair sharing) and the Argo semaphores in
// front of it do with the GPU jobs, services and quotas the policy declares.
//
// The model has two layers.
//
// Snapshot is Kueue's quota arithmetic, per ClusterQueue and per
// (flavor, resource) — here (card, kind): nominalQuota, borrowingLimit and
// lendingLimit inside a cohort — an implicit one, or a tree of Kueue
// v1beta2 Cohort objects with quota of their own (hierarchical cohorts) —,
// the usage of the admitted workloads, and
// Kueue's classical preemption algorithm (withinClusterQueue,
// reclaimWithinCohort, borrowWithinCohort with maxPriorityThreshold). It is a
// transcription of Kueue v0.17.0's code, not a reading of its documentation:
// every rule below names the function it follows, so that a change in Kueue
// can be traced to the line of the model it affects.
//
//   - pkg/cache/scheduler/resource_node.go: available, potentialAvailable,
//     addUsage, removeUsage, localQuota (lending limits), accumulateFromChild
//     and updateCohortResourceNode (a cohort's SubtreeQuota: its own
//     nominalQuota plus what each child lends), QuantitiesFitInQuota,
//     IsWithinNominalInResources, each recursing up a Cohort tree through
//     parents — snapshot.go for a ClusterQueue, cohorts.go for a cohort;
//   - pkg/cache/hierarchy/cycle.go: HasCycle (a cycle of parents stops
//     admission under it; vet refuses it, rule cohort-cycle);
//   - pkg/cache/scheduler/clusterqueue_snapshot.go: Borrowing, BorrowingWith;
//   - pkg/scheduler/flavorassigner/flavorassigner.go: fitsResourceQuota (when
//     preemption is even attempted); for a job that may land on several
//     cards, findFlavorForPodSets, checkFlavorForPodSets, flavorSelector,
//     shouldTryNextFlavor and isPreferred with the queue's
//     flavorFungibility, and preemption_oracle.go's SimulatePreemption —
//     flavors.go;
//   - pkg/scheduler/preemption/preemption.go: classicalPreemptions,
//     workloadFits, fillBackWorkloads;
//   - pkg/scheduler/preemption/classical/*.go: candidate collection up the
//     cohort tree (collectCandidatesForHierarchicalReclaim,
//     collectCandidatesInSubtree), classification
//     (classifyPreemptionVariant: HierarchicalReclaim,
//     ReclaimWithoutBorrowing, ReclaimWhileBorrowing), candidateIsValid
//     (up to the candidate's lowest common ancestor), and
//     FindHeightOfLowestSubtreeThatFits (mayReclaimInHierarchy, the
//     flavor's borrowing level) — cohorts.go;
//   - pkg/scheduler/preemption/common: SatisfiesPreemptionPolicy,
//     CandidatesOrdering;
//   - apis/kueue/v1beta2/clusterqueue_types.go: the CEL rule
//     "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never";
//   - pkg/cache/queue/cluster_queue.go: RequeueIfNotPresent (StrictFIFO
//     puts a head that cannot be admitted straight back), and
//     pkg/scheduler/scheduler.go: schedule, quotaResourcesToReserve,
//     makeClassicalIterator (a head that needs preemption but finds no
//     candidate reserves quota for the cycle) — queueing.go;
//   - pkg/workload/resources.go: AdjustResources (a container without a
//     request gets the LimitRange's defaultRequest before its limit), and
//     workload.go: totalRequestsFromPodSets — counted.go.
//
// The documentation pages are https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/
// and https://kueue.sigs.k8s.io/docs/concepts/preemption/; where the two
// disagreed (kubernetes-sigs/kueue#10171: borrowWithinCohort only preempts in
// ClusterQueues above their nominal quota, which the docs did not say until
// kubernetes-sigs/kueue#10210), the model follows the code.
//
// Explain is the analysis on top: for every GPU step template (and its
// cache-free variant when it takes other locks), every priority on the
// ladder and every service state (each on-demand service up or down), how
// many jobs are admitted at once, what binds, what the locks do, what is
// left, how preemption changes it, and the findings (starvation, dead
// preemption paths — proved over every state Kueue can reach, evictions
// included, deadsearch.go —, lock sizes, declared against physical GPU
// memory, mixed units). Its JSON form is a documented contract (README: explain -o json).
//
// Units: shares are time-slicing replicas of the shares resource
// (policy.Resource); host memory and GPU memory are MiB, as in package
// policy. Quantities leave the package as Kubernetes quantity strings
// (policy.Kind.QuantityString: "4", "8Gi", "404Mi"), keyed by the resource
// names render writes (policy.Resource).
package admission

// KueueVersion is the Kueue release whose behaviour the model transcribes.
const KueueVersion = "v0.17"
