package admissiontest

import "github.com/gpupolicy/gpupolicy/internal/policy"

// deadCard puts a policy's single card "c" on the lab node's labels, so
// that the real-Kueue cross-check can run its pods (one RTX 5060 Ti,
// 16,311 MiB, 8 shares).
func deadCard(name string) *PolicyWrapper {
	return MakePolicy(name).Card("c", 16311, 8).
		CardModel("c", "NVIDIA GeForce RTX 5060 Ti", "NVIDIA-GeForce-RTX-5060-Ti-SHARED").
		Priority("high", 100).DefaultPriority("mid", 50).Priority("low", 10)
}

// EvictThenWithin is a cohort in which train's withinClusterQueue fires
// only in states the cold-start scenarios never build: experiments (which
// sorts first, so fills first) may borrow all of train's two shares, and
// train's jobs get them back by reclaimWithinCohort, evicting experiments'
// jobs. Once train runs two mid jobs, a high train job has nothing to
// reclaim (experiments is within its nominal quota of 0) and evicts a mid
// job of its own queue: InClusterQueue.
func EvictThenWithin() *PolicyWrapper {
	return deadCard("evict-then-within").
		Queue(MakeQueue("experiments").Cohort("co").Namespaces("experiments").
			Flavor(MakeFlavor("c").BorrowingLimit(policy.Shares, 2).
				BorrowingLimit(policy.HostMemory, GiB(8)).BorrowingLimit(policy.GPUMemory, 8000))).
		Queue(MakeQueue("train").Cohort("co").Namespaces("train").
			Flavor(MakeFlavor("c").Shares(2).HostMemory(GiB(8)).GPUMemory(8000)).
			Preemption("LowerPriority", "LowerPriority")).
		Template(MakeTemplate("exp").Namespace("experiments").Queue("experiments").Card("c").Request(1, GiB(1), 1000)).
		Template(MakeTemplate("tr").Namespace("train").Queue("train").Card("c").Request(1, GiB(1), 1000))
}

// DeadWithin is a queue whose withinClusterQueue (LowerPriority) no
// reachable state fires, with no reason that shows it from the
// configuration alone: two services of different priorities that the
// quota always admits together, so neither ever waits.
func DeadWithin() *PolicyWrapper {
	return deadCard("dead-within").
		Queue(MakeQueue("svc").Namespaces("models").
			Flavor(MakeFlavor("c").Shares(2).HostMemory(GiB(8)).GPUMemory(8000)).
			Preemption("LowerPriority", "Never")).
		Service(MakeService("big").Namespace("models").Queue("svc").Card("c").Priority("high").Request(1, GiB(2), 4000)).
		Service(MakeService("small").OnDemand(600).Namespace("models").Queue("svc").Card("c").Priority("low").Request(1, GiB(2), 4000))
}

// DeadReclaim is a cohort in which owner's reclaimWithinCohort
// (LowerPriority) is dead with no reason the configuration alone shows:
// owner lends two of its six shares, the borrower's on-demand service
// borrows one of them, and an owner job within owner's nominal quota is
// short while it runs; but the service runs at the top of the ladder,
// so no owner job is ever above it. Owner's jobs wait for it to scale
// down.
func DeadReclaim() *PolicyWrapper {
	return deadCard("dead-reclaim").
		Queue(MakeQueue("owner").Cohort("co").Namespaces("owner").
			Flavor(MakeFlavor("c").Shares(6).HostMemory(GiB(12)).GPUMemory(12000).
				LendingLimit(policy.Shares, 2).LendingLimit(policy.HostMemory, GiB(4)).LendingLimit(policy.GPUMemory, 4000)).
			Preemption("Never", "LowerPriority")).
		Queue(MakeQueue("borrower").Cohort("co").Namespaces("llm").
			Flavor(MakeFlavor("c").BorrowingLimit(policy.Shares, 2).
				BorrowingLimit(policy.HostMemory, GiB(4)).BorrowingLimit(policy.GPUMemory, 4000))).
		Service(MakeService("llm").OnDemand(600).Namespace("llm").Queue("borrower").Card("c").Priority("high").Request(1, GiB(2), 2000)).
		Template(MakeTemplate("job").Namespace("owner").Queue("owner").Card("c").Request(1, GiB(1), 1000))
}
