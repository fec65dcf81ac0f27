// Package admissiontest builds typed policies in Go for tests and
// benchmarks, in the style of Kueue's own test wrappers
// (pkg/util/testing: MakeClusterQueue("cq").Cohort("c").ResourceGroup(...)),
// so that a table test reads like its scenario:
//
//	p := admissiontest.MakePolicy("two-queues").
//		Card("a100", 40960, 8).
//		Priority("high", 100).DefaultPriority("low", 10).
//		Queue(admissiontest.MakeQueue("team-a").Cohort("gpu").
//			Flavor(admissiontest.MakeFlavor("a100").Shares(6).LendingLimit(policy.Shares, 2)).
//			Preemption("LowerPriority", "LowerPriority")).
//		Template(admissiontest.MakeTemplate("step").Queue("team-a").Card("a100").Request(1, 2048, 1024)).
//		Obj()
//
// The policies it builds skip CUE: they have no source positions and have
// not been through policy.Check unless the test calls it.
package admissiontest

import (
	"fmt"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// GiB converts GiB to MiB.
func GiB(n int64) int64 { return n * 1024 }

func ptr(v int64) *int64 { return &v }

// PolicyWrapper builds a policy.Policy.
type PolicyWrapper struct{ p policy.Policy }

// MakePolicy starts a policy with the lab's defaults: declarations through
// gpupolicy.dev/gpu-memory, 1,024 MiB when a job declares nothing.
func MakePolicy(name string) *PolicyWrapper {
	return &PolicyWrapper{p: policy.Policy{
		Name:                name,
		DeclarationResource: "gpupolicy.dev/gpu-memory",
		DefaultGPUMemoryMiB: 1024,
		Cards:               map[string]policy.Card{},
		Services:            map[string]policy.Service{},
		Queues:              map[string]policy.ClusterQueue{},
		Priorities:          map[string]policy.Priority{},
		Locks:               map[string]policy.Lock{},
		Templates:           map[string]policy.Template{},
		SemaphoreConfigMap:  "gpu-semaphore",
		DevicePlugin:        policy.DevicePlugin{Namespace: "nvidia-device-plugin", ConfigMap: "nvidia-device-plugin-config"},
	}}
}

// Card adds a card (ResourceFlavor): physical memory in MiB and shares.
func (w *PolicyWrapper) Card(name string, memoryMiB, shares int64) *PolicyWrapper {
	w.p.Cards[name] = policy.Card{Name: name, Model: name, MemoryMiB: memoryMiB, Shares: shares,
		NodeLabels: map[string]string{"nvidia.com/gpu.product": name}}
	return w
}

// CardModel sets a card's marketing name and node labels.
func (w *PolicyWrapper) CardModel(name, model, productLabel string) *PolicyWrapper {
	c := w.p.Cards[name]
	c.Model = model
	c.NodeLabels = map[string]string{"nvidia.com/gpu.product": productLabel}
	w.p.Cards[name] = c
	return w
}

// Priority adds a rung of the ladder.
func (w *PolicyWrapper) Priority(name string, value int32) *PolicyWrapper {
	w.p.Priorities[name] = policy.Priority{Name: name, Value: value, Description: name}
	return w
}

// DefaultPriority adds the rung a step gets when it names none.
func (w *PolicyWrapper) DefaultPriority(name string, value int32) *PolicyWrapper {
	w.p.Priorities[name] = policy.Priority{Name: name, Value: value, Default: true, Description: name}
	return w
}

// Queue adds a ClusterQueue.
func (w *PolicyWrapper) Queue(q *QueueWrapper) *PolicyWrapper {
	cq := q.q
	if len(cq.Namespaces) == 0 {
		cq.Namespaces = []string{"default"}
	}
	if cq.LocalQueue == "" {
		cq.LocalQueue = cq.Name
	}
	w.p.Queues[cq.Name] = cq
	return w
}

// Service adds a service.
func (w *PolicyWrapper) Service(s *ServiceWrapper) *PolicyWrapper {
	w.p.Services[s.s.Name] = s.s
	return w
}

// Lock adds an Argo semaphore.
func (w *PolicyWrapper) Lock(name string, size int64, takenBefore ...string) *PolicyWrapper {
	w.p.Locks[name] = policy.Lock{Name: name, Size: size, TakenBefore: takenBefore}
	return w
}

// Template adds a GPU step template; its priority defaults to the
// ladder's default when Obj is called.
func (w *PolicyWrapper) Template(t *TemplateWrapper) *PolicyWrapper {
	w.p.Templates[t.t.Name] = t.t
	return w
}

// Obj returns the policy. Templates without a priority get the default.
func (w *PolicyWrapper) Obj() *policy.Policy {
	p := w.p
	def := p.DefaultPriority()
	for n, t := range p.Templates {
		if t.Priority == "" {
			t.Priority = def
			p.Templates[n] = t
		}
	}
	return &p
}

// QueueWrapper builds a ClusterQueue.
type QueueWrapper struct{ q policy.ClusterQueue }

// MakeQueue starts a ClusterQueue with no cohort, no quota, no
// preemption and Kueue's default queueing strategy, BestEffortFIFO.
func MakeQueue(name string) *QueueWrapper {
	return &QueueWrapper{q: policy.ClusterQueue{Name: name, Flavors: map[string]policy.FlavorQuotas{},
		Preemption:       policy.Preemption{WithinClusterQueue: "Never", ReclaimWithinCohort: "Never", BorrowWithinCohort: "Never"},
		QueueingStrategy: policy.BestEffortFIFO}}
}

// StrictFIFO sets the queueing strategy to StrictFIFO.
func (q *QueueWrapper) StrictFIFO() *QueueWrapper { q.q.QueueingStrategy = policy.StrictFIFO; return q }

// Cohort sets cohortName.
func (q *QueueWrapper) Cohort(c string) *QueueWrapper { q.q.Cohort = c; return q }

// Namespaces sets where its LocalQueues are.
func (q *QueueWrapper) Namespaces(ns ...string) *QueueWrapper { q.q.Namespaces = ns; return q }

// Flavor adds a card's quotas; cards are in the order added, the order
// Kueue tries them (policy.ClusterQueue.FlavorOrder).
func (q *QueueWrapper) Flavor(f *FlavorWrapper) *QueueWrapper {
	if _, ok := q.q.Flavors[f.card]; !ok {
		q.q.FlavorOrder = append(q.q.FlavorOrder, f.card)
	}
	q.q.Flavors[f.card] = f.f
	return q
}

// Preemption sets withinClusterQueue and reclaimWithinCohort.
func (q *QueueWrapper) Preemption(within, reclaim string) *QueueWrapper {
	q.q.Preemption.WithinClusterQueue = within
	q.q.Preemption.ReclaimWithinCohort = reclaim
	return q
}

// BorrowWithinCohort sets borrowWithinCohort's policy and
// maxPriorityThreshold ("" for none).
func (q *QueueWrapper) BorrowWithinCohort(pol, maxPriorityThreshold string) *QueueWrapper {
	q.q.Preemption.BorrowWithinCohort = pol
	q.q.Preemption.MaxPriorityThreshold = maxPriorityThreshold
	return q
}

// Obj returns the ClusterQueue.
func (q *QueueWrapper) Obj() policy.ClusterQueue { return q.q }

// FlavorWrapper builds one card's quotas in a queue.
type FlavorWrapper struct {
	card string
	f    policy.FlavorQuotas
}

// MakeFlavor starts a card's quotas at zero.
func MakeFlavor(card string) *FlavorWrapper { return &FlavorWrapper{card: card} }

func (f *FlavorWrapper) quota(k policy.Kind) *policy.Quota {
	switch k {
	case policy.Shares:
		return &f.f.Shares
	case policy.HostMemory:
		return &f.f.HostMemory
	}
	return &f.f.GPUMemory
}

// Shares sets the shares' nominalQuota.
func (f *FlavorWrapper) Shares(n int64) *FlavorWrapper { f.f.Shares.Nominal = n; return f }

// HostMemory sets the host-memory nominalQuota in MiB.
func (f *FlavorWrapper) HostMemory(mib int64) *FlavorWrapper { f.f.HostMemory.Nominal = mib; return f }

// GPUMemory sets the GPU-memory nominalQuota in MiB.
func (f *FlavorWrapper) GPUMemory(mib int64) *FlavorWrapper { f.f.GPUMemory.Nominal = mib; return f }

// BorrowingLimit sets a kind's borrowingLimit.
func (f *FlavorWrapper) BorrowingLimit(k policy.Kind, v int64) *FlavorWrapper {
	f.quota(k).BorrowingLimit = ptr(v)
	return f
}

// LendingLimit sets a kind's lendingLimit.
func (f *FlavorWrapper) LendingLimit(k policy.Kind, v int64) *FlavorWrapper {
	f.quota(k).LendingLimit = ptr(v)
	return f
}

// Obj returns the card's quotas.
func (f *FlavorWrapper) Obj() policy.FlavorQuotas { return f.f }

// ServiceWrapper builds a service.
type ServiceWrapper struct{ s policy.Service }

// Obj returns the service.
func (s *ServiceWrapper) Obj() policy.Service { return s.s }

// MakeService starts an always-on service asking one share.
func MakeService(name string) *ServiceWrapper {
	return &ServiceWrapper{s: policy.Service{Name: name, Mode: policy.AlwaysOn, Namespace: "models",
		Request: policy.Request{Shares: 1}}}
}

// OnDemand makes it on-demand, scaled to zero idleSeconds after its last
// request.
func (s *ServiceWrapper) OnDemand(idleSeconds int64) *ServiceWrapper {
	s.s.Mode = policy.OnDemand
	s.s.IdleScaleDownSeconds = idleSeconds
	return s
}

// Queue sets its ClusterQueue.
func (s *ServiceWrapper) Queue(q string) *ServiceWrapper { s.s.Queue = q; return s }

// Card sets its card.
func (s *ServiceWrapper) Card(c string) *ServiceWrapper { s.s.Card = c; return s }

// Priority sets its priority.
func (s *ServiceWrapper) Priority(p string) *ServiceWrapper { s.s.Priority = p; return s }

// Namespace sets its namespace.
func (s *ServiceWrapper) Namespace(ns string) *ServiceWrapper { s.s.Namespace = ns; return s }

// Request sets shares, host memory (MiB) and declared GPU memory (MiB).
func (s *ServiceWrapper) Request(shares, hostMiB, gpuMiB int64) *ServiceWrapper {
	s.s.Request = policy.Request{Shares: shares, HostMemoryMiB: hostMiB, GPUMemoryMiB: gpuMiB}
	return s
}

// TemplateWrapper builds a GPU step template.
type TemplateWrapper struct{ t policy.Template }

// MakeTemplate starts a template asking one share, in namespace
// "experiments", with no locks.
func MakeTemplate(name string) *TemplateWrapper {
	return &TemplateWrapper{t: policy.Template{Name: name, Namespace: "experiments", Image: "job:latest",
		Request: policy.Request{Shares: 1}}}
}

// Queue sets its ClusterQueue.
func (t *TemplateWrapper) Queue(q string) *TemplateWrapper { t.t.Queue = q; return t }

// Card sets its card.
func (t *TemplateWrapper) Card(c string) *TemplateWrapper { t.t.Card = c; return t }

// Namespace sets its namespace.
func (t *TemplateWrapper) Namespace(ns string) *TemplateWrapper { t.t.Namespace = ns; return t }

// Priority sets its default priority.
func (t *TemplateWrapper) Priority(p string) *TemplateWrapper { t.t.Priority = p; return t }

// Locks sets the locks it takes, in order.
func (t *TemplateWrapper) Locks(l ...string) *TemplateWrapper { t.t.Locks = l; return t }

// Request sets shares, host memory (MiB) and declared GPU memory (MiB).
func (t *TemplateWrapper) Request(shares, hostMiB, gpuMiB int64) *TemplateWrapper {
	t.t.Request = policy.Request{Shares: shares, HostMemoryMiB: hostMiB, GPUMemoryMiB: gpuMiB}
	return t
}

// TimeLimit sets activeDeadlineSeconds.
func (t *TemplateWrapper) TimeLimit(seconds int64) *TemplateWrapper {
	t.t.TimeLimitSeconds = seconds
	return t
}

// CacheFree adds the variant without the model-cache mount.
func (t *TemplateWrapper) CacheFree(name string, locks ...string) *TemplateWrapper {
	t.t.CacheFree = &policy.CacheFree{Name: name, Locks: locks}
	return t
}

// Exclusive makes it exclusive (policy.Exclusive): jobs is
// policy.ExclusiveWait or policy.ExclusiveEvict. Its Request is then the
// least it needs; admission.SizeLocks sizes it.
func (t *TemplateWrapper) Exclusive(jobs string) *TemplateWrapper {
	t.t.Exclusive = &policy.Exclusive{Jobs: jobs}
	return t
}

// ModelCache mounts the shared model store.
func (t *TemplateWrapper) ModelCache(claim, mountPath string) *TemplateWrapper {
	t.t.ModelCache = &policy.ModelCache{Claim: claim, MountPath: mountPath, ReadOnly: true}
	return t
}

// Lab is policies/lab built in Go: one RTX 5060 Ti (16,311 MiB, 8 shares),
// four always-on models (1 share, 1 GiB each; 3,707 MiB declared together),
// the on-demand Qwen2.5-7B in gpu-large-model (borrows 1 share, 4 GiB and
// 12,200 MiB), gpu-general owning the card, the ladder always-on 1000 >
// training 100 (default) > on-demand-llm 50 > batch 10, no Argo lock
// (Kueue alone gates), gpu-step with its cache-free variant, and the
// exclusive vllm-bench (training, evicts running jobs; at least 12,200
// MiB, 8 GiB of host memory). TestLabBuilderMatchesCUE keeps it equal to the CUE policy.
func Lab() *PolicyWrapper {
	w := MakePolicy("lab").
		Card("rtx-5060-ti", 16311, 8).
		CardModel("rtx-5060-ti", "NVIDIA GeForce RTX 5060 Ti", "NVIDIA-GeForce-RTX-5060-Ti-SHARED").
		Priority("always-on", 1000).DefaultPriority("training", 100).
		Priority("on-demand-llm", 50).Priority("batch", 10).
		Queue(MakeQueue("gpu-general").Cohort("gpu").Namespaces("experiments", "models").
			Flavor(MakeFlavor("rtx-5060-ti").Shares(8).HostMemory(GiB(12)).GPUMemory(16311)).
			Preemption("LowerPriority", "LowerPriority")).
		Queue(MakeQueue("gpu-large-model").Cohort("gpu").Namespaces("llm").
			Flavor(MakeFlavor("rtx-5060-ti").
				BorrowingLimit(policy.Shares, 1).
				BorrowingLimit(policy.HostMemory, GiB(4)).
				BorrowingLimit(policy.GPUMemory, 12200)).
			Preemption("Never", "LowerPriority").
			BorrowWithinCohort("LowerPriority", "batch")).
		Template(MakeTemplate("gpu-step").Queue("gpu-general").Card("rtx-5060-ti").
			Request(1, GiB(2), 1024).TimeLimit(3600).
			ModelCache("hf-cache", "/models/hf").CacheFree("gpu-step-no-cache")).
		Template(MakeTemplate("vllm-bench").Queue("gpu-general").Card("rtx-5060-ti").Priority("training").
			Request(1, GiB(8), 12200).TimeLimit(3600).
			ModelCache("hf-cache", "/models/hf").Exclusive(policy.ExclusiveEvict))
	for name, mib := range map[string]int64{"embed": 1203, "rerank": 958, "asr": 1046, "ocr": 500} {
		w.Service(MakeService(name).Queue("gpu-general").Card("rtx-5060-ti").Priority("always-on").
			Request(1, GiB(1), mib))
	}
	w.Service(MakeService("qwen2-5-7b").OnDemand(3600).Namespace("llm").Queue("gpu-large-model").
		Card("rtx-5060-ti").Priority("on-demand-llm").Request(1, GiB(4), 12200))
	return w
}

// Generated is a large synthetic policy for benchmarks: queues
// ClusterQueues in cohorts of ten, one card per cohort (queues/10 cards,
// at least one), the lab's four-rung ladder, one always-on service per
// cohort, four on-demand services in the first cohorts (16 service
// states), and one step template per queue behind a shared main lock.
// In each cohort the first queue owns most of the card and lends half of
// it; the others own a share each, lend nothing beyond it and may borrow
// up to two.
func Generated(queues int) *policy.Policy {
	cohorts := max(1, (queues+9)/10)
	w := MakePolicy(fmt.Sprintf("generated-%d", queues)).
		Priority("always-on", 1000).DefaultPriority("training", 100).
		Priority("on-demand-llm", 50).Priority("batch", 10).
		Lock("main", 4)
	onDemand := 0
	q := 0
	for c := 0; c < cohorts && q < queues; c++ {
		card := fmt.Sprintf("card-%03d", c)
		cohort := fmt.Sprintf("cohort-%03d", c)
		w.Card(card, 24576, 17) // 8 for the first queue, 1 each for nine more
		for i := 0; i < 10 && q < queues; i, q = i+1, q+1 {
			name := fmt.Sprintf("q-%04d", q)
			f := MakeFlavor(card)
			qw := MakeQueue(name).Cohort(cohort).Namespaces("ns-" + name)
			if i == 0 {
				f.Shares(8).HostMemory(GiB(32)).GPUMemory(16384).
					LendingLimit(policy.Shares, 4).LendingLimit(policy.HostMemory, GiB(16)).LendingLimit(policy.GPUMemory, 8192)
				qw.Preemption("LowerPriority", "LowerPriority")
				w.Service(MakeService(fmt.Sprintf("svc-%03d", c)).Namespace("ns-"+name).Queue(name).Card(card).
					Priority("always-on").Request(1, GiB(2), 2048))
			} else {
				f.Shares(1).HostMemory(GiB(4)).GPUMemory(1024).
					BorrowingLimit(policy.Shares, 2).BorrowingLimit(policy.HostMemory, GiB(8)).BorrowingLimit(policy.GPUMemory, 4096)
				qw.Preemption("LowerOrNewerEqualPriority", "Any").BorrowWithinCohort("LowerPriority", "batch")
				if onDemand < 4 && i == 1 {
					w.Service(MakeService(fmt.Sprintf("llm-%d", onDemand)).OnDemand(3600).Namespace("ns-"+name).
						Queue(name).Card(card).Priority("on-demand-llm").Request(1, GiB(4), 4096))
					onDemand++
				}
			}
			w.Queue(qw.Flavor(f))
			w.Template(MakeTemplate("step-"+name).Namespace("ns-"+name).Queue(name).Card(card).
				Locks("main").Request(1, GiB(2), 1024).TimeLimit(3600))
		}
	}
	return w.Obj()
}
