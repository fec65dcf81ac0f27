// Package policy is the typed policy model: the contract that every stage of
// gpupolicy (vet, render, explain, drift, verify) reads. It is decoded from a
// CUE policy that has passed the schema in package schema; CUE stays the
// author's language, and nothing downstream touches CUE values.
//
// Units: shares are time-slicing replicas of nvidia.com/gpu (a count);
// host memory and GPU memory are in MiB; times are in seconds.
package policy

import (
	"fmt"
	"maps"
	"slices"
	"sort"
)

// Kubernetes resource names for the quantities a GPU job requests. The
// GPU-memory declaration resource is named by the policy
// (Policy.DeclarationResource).
const (
	// ResourceShares is the device plugin's GPU resource, the one its
	// time-slicing config splits into shares. Nodes advertise the shares
	// under SharesResourceName, which is this name unless the device plugin
	// renames shared resources.
	ResourceShares = "nvidia.com/gpu"
	// ResourceHostMemory is node memory.
	ResourceHostMemory = "memory"
)

// Kind is one of the three quantities the policy accounts.
type Kind int

const (
	// Shares counts time-slicing replicas of nvidia.com/gpu.
	Shares Kind = iota
	// HostMemory is node memory in MiB.
	HostMemory
	// GPUMemory is declared GPU memory in MiB (accounting, not a limit).
	GPUMemory
)

// Kinds lists the kinds in their canonical order.
var Kinds = []Kind{Shares, HostMemory, GPUMemory}

// Unit is "shares" or "MiB".
func (k Kind) Unit() string {
	if k == Shares {
		return "shares"
	}
	return "MiB"
}

// String is the lab's word for the kind.
func (k Kind) String() string {
	switch k {
	case Shares:
		return "shares"
	case HostMemory:
		return "host memory"
	default:
		return "GPU memory"
	}
}

// Policy is a vetted, typed policy.
type Policy struct {
	// Name identifies the policy.
	Name string
	// DeclarationResource is the extended resource that carries a pod's
	// GPU-memory declaration, e.g. "gpupolicy.dev/gpu-memory".
	DeclarationResource string
	// DefaultGPUMemoryMiB is what a job that declares nothing is counted at
	// (a LimitRange default in each job namespace).
	DefaultGPUMemoryMiB int64

	Cards      map[string]Card
	Services   map[string]Service
	Queues     map[string]ClusterQueue
	Priorities map[string]Priority
	Locks      map[string]Lock
	Templates  map[string]Template
	// Access is what the policy states, per namespace, about the
	// priorities and queues its GPU workloads may use (see Allowed).
	Access map[string]Access

	// SemaphoreConfigMap is the ConfigMap that backs every lock.
	SemaphoreConfigMap string
	// DevicePlugin configures the NVIDIA device plugin's time-slicing.
	DevicePlugin DevicePlugin

	// GPUMemoryForms records how each GPU-memory quantity was written
	// (plain integer or Mi suffix), for the units-mixed rule.
	GPUMemoryForms []QuantityForm

	src source
}

// Card is one GPU model, rendered as a Kueue ResourceFlavor of the same name.
type Card struct {
	Name      string
	Model     string
	MemoryMiB int64
	Shares    int64
	// NodeLabels select the nodes that carry the card.
	NodeLabels map[string]string
	// NodeSelector is the policy's label selector for the card's nodes
	// (kubectl -l syntax); empty: NodeLabels (Nodes). CardsPerNode is how
	// many cards each such node has.
	NodeSelector string
	CardsPerNode int64
}

// ServiceMode is "always-on" or "on-demand".
type ServiceMode string

const (
	AlwaysOn ServiceMode = "always-on"
	OnDemand ServiceMode = "on-demand"
)

// Service is a long-running model server holding shares through a queue.
type Service struct {
	Name        string
	Mode        ServiceMode
	Description string
	// IdleScaleDownSeconds is how long an on-demand service stays up after
	// its last request (0 for always-on services).
	IdleScaleDownSeconds int64
	Namespace            string
	Queue                string
	Priority             string
	Card                 string
	Request              Request
}

// Request is what one pod asks of a queue: shares, host memory (MiB) and
// declared GPU memory (MiB).
type Request struct {
	Shares        int64
	HostMemoryMiB int64
	GPUMemoryMiB  int64
}

// Get returns the request's amount of one kind.
func (r Request) Get(k Kind) int64 {
	switch k {
	case Shares:
		return r.Shares
	case HostMemory:
		return r.HostMemoryMiB
	default:
		return r.GPUMemoryMiB
	}
}

// ClusterQueue is a Kueue ClusterQueue and its LocalQueues.
type ClusterQueue struct {
	Name string
	// Cohort is the Kueue cohortName; "" for none.
	Cohort string
	// Namespaces each hold a LocalQueue named LocalQueue.
	Namespaces []string
	LocalQueue string
	// Flavors maps a card (ResourceFlavor) name to its quotas.
	Flavors    map[string]FlavorQuotas
	Preemption Preemption
}

// FlavorNames returns the queue's flavors, sorted.
func (q ClusterQueue) FlavorNames() []string { return slices.Sorted(maps.Keys(q.Flavors)) }

// FlavorQuotas are one flavor's quotas in a ClusterQueue.
type FlavorQuotas struct {
	Shares     Quota
	HostMemory Quota
	GPUMemory  Quota
}

// Get returns the quota of one kind.
func (f FlavorQuotas) Get(k Kind) Quota {
	switch k {
	case Shares:
		return f.Shares
	case HostMemory:
		return f.HostMemory
	default:
		return f.GPUMemory
	}
}

// Quota is Kueue's per-resource quota in the kind's unit (shares or MiB).
// A nil limit means "no limit" (Kueue's default).
type Quota struct {
	Nominal        int64
	BorrowingLimit *int64
	LendingLimit   *int64
}

// Preemption mirrors Kueue's ClusterQueuePreemption.
type Preemption struct {
	// WithinClusterQueue: Never, LowerPriority or LowerOrNewerEqualPriority.
	WithinClusterQueue string
	// ReclaimWithinCohort: Never, LowerPriority or Any.
	ReclaimWithinCohort string
	// BorrowWithinCohort: Never or LowerPriority.
	BorrowWithinCohort string
	// MaxPriorityThreshold names the highest priority that may be preempted
	// while borrowing; "" for none.
	MaxPriorityThreshold string
}

// Priority is one rung of the ladder (a WorkloadPriorityClass).
type Priority struct {
	Name        string
	Value       int32
	Default     bool
	Description string
}

// Lock is an Argo semaphore; its size is how many holders it admits.
type Lock struct {
	Name        string
	Size        int64
	TakenBefore []string
	Description string
}

// Template is a GPU step WorkflowTemplate.
type Template struct {
	Name      string
	Namespace string
	Queue     string
	Card      string
	// Priority is the template's default priority (already resolved to the
	// ladder's default when the policy names none).
	Priority string
	// Locks are taken in this order.
	Locks   []string
	Image   string
	Command []string
	// Request is the step's default request; GPUMemoryMiB is the default
	// GPU-memory declaration.
	Request          Request
	TimeLimitSeconds int64
	ModelCache       *ModelCache
	CacheFree        *CacheFree
}

// ModelCache is the shared model store's mount.
type ModelCache struct {
	Claim     string
	MountPath string
	ReadOnly  bool
}

// CacheFree is the variant of a template without the model-cache mount.
type CacheFree struct {
	Name  string
	Locks []string
}

// DevicePlugin configures the NVIDIA device plugin's time-slicing ConfigMap.
type DevicePlugin struct {
	Namespace       string
	ConfigMap       string
	RenameByDefault bool
}

// QuantityForm records how one GPU-memory quantity was written.
type QuantityForm struct {
	// Path is the field, e.g. ["templates", "gpu-step", "gpuMemory"].
	Path []string
	MiB  int64
	// Suffixed is true for "NMi", false for a plain integer.
	Suffixed bool
}

// CardNames returns the cards' names, sorted.
func (p *Policy) CardNames() []string { return slices.Sorted(maps.Keys(p.Cards)) }

// ServiceNames returns the services' names, sorted.
func (p *Policy) ServiceNames() []string { return slices.Sorted(maps.Keys(p.Services)) }

// QueueNames returns the ClusterQueues' names, sorted.
func (p *Policy) QueueNames() []string { return slices.Sorted(maps.Keys(p.Queues)) }

// LockNames returns the locks' names, sorted.
func (p *Policy) LockNames() []string { return slices.Sorted(maps.Keys(p.Locks)) }

// TemplateNames returns the templates' names, sorted.
func (p *Policy) TemplateNames() []string { return slices.Sorted(maps.Keys(p.Templates)) }

// Ladder returns the priorities from the highest value to the lowest.
func (p *Policy) Ladder() []Priority {
	out := make([]Priority, 0, len(p.Priorities))
	for _, pr := range p.Priorities {
		out = append(out, pr)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Value != out[j].Value {
			return out[i].Value > out[j].Value
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// DefaultPriority returns the ladder's default priority ("" if a vetted
// policy could have none, which it cannot).
func (p *Policy) DefaultPriority() string {
	for _, pr := range p.Ladder() {
		if pr.Default {
			return pr.Name
		}
	}
	return ""
}

// OnDemandServices returns the on-demand services' names, sorted.
func (p *Policy) OnDemandServices() []string {
	var out []string
	for _, n := range p.ServiceNames() {
		if p.Services[n].Mode == OnDemand {
			out = append(out, n)
		}
	}
	return out
}

// JobNamespaces returns the namespaces that templates run in, sorted.
func (p *Policy) JobNamespaces() []string {
	set := map[string]bool{}
	for _, t := range p.Templates {
		set[t.Namespace] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// Resource returns the Kubernetes resource name of a kind, as the node
// advertises it and every quota and request must name it: the shares
// resource (SharesResource), memory, or the declaration resource.
func (p *Policy) Resource(k Kind) string {
	switch k {
	case Shares:
		return p.SharesResource()
	case HostMemory:
		return ResourceHostMemory
	default:
		return p.DeclarationResource
	}
}

// FormatAmount prints an amount with its unit: "4 shares", "12,200 MiB".
func FormatAmount(k Kind, v int64) string {
	if k == Shares {
		if v == 1 || v == -1 {
			return fmt.Sprintf("%d share", v)
		}
		return fmt.Sprintf("%d shares", v)
	}
	return Thousands(v) + " MiB"
}

// Thousands formats an integer with comma thousands separators.
func Thousands(v int64) string {
	neg := v < 0
	if neg {
		v = -v
	}
	s := fmt.Sprintf("%d", v)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}
