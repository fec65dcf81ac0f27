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
	"strconv"
	"strings"
	"time"
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
	Cohorts    map[string]Cohort // declared Cohort objects (cohorts.go)
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

	// src is where Pos reads positions, shared with the policy's copies.
	src *source
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
	// LastActivity is where the service's idle scaler records its last
	// request (on-demand services; the zero value: the policy does not
	// say).
	LastActivity LastActivity
	Namespace    string
	Queue        string
	Priority     string
	Card         string
	Request      Request
}

// LastActivity is where an on-demand service's idle scaler records its
// last request (schema #LastActivity): a time in one annotation or one
// label on the service's pod or on the Deployment that owns it (On),
// written as Format. The zero value means the policy does not say.
type LastActivity struct {
	// On is LastActivityOnPod or LastActivityOnDeployment.
	On string
	// Annotation or Label is the key (exactly one is set: rule
	// last-activity).
	Annotation, Label string
	// Format is TimeRFC3339 or TimeUnix.
	Format string
}

// Where a LastActivity is read (LastActivity.On), and how its time is
// written (LastActivity.Format).
const (
	LastActivityOnPod        = "pod"
	LastActivityOnDeployment = "deployment"
	// TimeRFC3339: "2026-11-03T14:20:00Z". TimeUnix: seconds since the
	// epoch ("1793715600"), the form a label value can hold.
	TimeRFC3339 = "rfc3339"
	TimeUnix    = "unix"
)

// Known reports whether the policy says where the last request is read.
func (l LastActivity) Known() bool { return l.Annotation != "" || l.Label != "" }

// Read returns the key's value among an object's annotations or labels.
func (l LastActivity) Read(annotations, labels map[string]string) (string, bool) {
	if l.Label != "" {
		v, ok := labels[l.Label]
		return v, ok
	}
	v, ok := annotations[l.Annotation]
	return v, ok
}

// Parse reads a value written as Format. Errors name the format.
func (l LastActivity) Parse(v string) (time.Time, error) {
	if l.Format == TimeUnix {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q is not a time in Unix seconds", v)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time", v)
	}
	return t.UTC(), nil
}

// Field says what is read: "annotation lab.internal/last-request (RFC
// 3339)".
func (l LastActivity) Field() string {
	kind, key := "annotation", l.Annotation
	if l.Label != "" {
		kind, key = "label", l.Label
	}
	format := "RFC 3339"
	if l.Format == TimeUnix {
		format = "Unix seconds"
	}
	return fmt.Sprintf("%s %s (%s)", kind, key, format)
}

// Describe says what is read and where: "annotation
// lab.internal/last-request (RFC 3339) on the service's pod".
func (l LastActivity) Describe() string {
	on := "pod"
	if l.On == LastActivityOnDeployment {
		on = "Deployment"
	}
	return l.Field() + " on the service's " + on
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
	Flavors map[string]FlavorQuotas
	// FlavorOrder lists Flavors' cards in the policy's declaration order,
	// the order Kueue tries them in (FlavorNames); nil for a policy built
	// in Go, which then has them sorted.
	FlavorOrder []string
	// FlavorFungibility is Kueue's flavorFungibility; zero fields take
	// Kueue's defaults (Fungibility).
	FlavorFungibility FlavorFungibility
	Preemption        Preemption
	// QueueingStrategy is Kueue's queueingStrategy: BestEffortFIFO or
	// StrictFIFO.
	QueueingStrategy string
}

// Kueue's queueing strategies (ClusterQueue spec.queueingStrategy).
const (
	// BestEffortFIFO: a pending workload that cannot be admitted is set
	// aside and the next one in the queue is tried (Kueue's default).
	BestEffortFIFO = "BestEffortFIFO"
	// StrictFIFO: the queue's head (highest priority, then oldest) is
	// retried first every cycle, so nothing behind it is admitted while
	// it cannot be.
	StrictFIFO = "StrictFIFO"
)

// Strategy is the queue's queueing strategy, BestEffortFIFO when the
// model leaves it empty (a policy built in Go rather than loaded).
func (q ClusterQueue) Strategy() string {
	if q.QueueingStrategy == "" {
		return BestEffortFIFO
	}
	return q.QueueingStrategy
}

// FlavorNames returns the queue's flavors in the order Kueue tries them:
// the policy's declaration order (FlavorOrder), sorted when the queue has
// none or it does not list exactly Flavors.
func (q ClusterQueue) FlavorNames() []string {
	if len(q.FlavorOrder) == len(q.Flavors) {
		ok := true
		for _, f := range q.FlavorOrder {
			if _, in := q.Flavors[f]; !in {
				ok = false
				break
			}
		}
		if ok {
			return slices.Clone(q.FlavorOrder)
		}
	}
	return slices.Sorted(maps.Keys(q.Flavors))
}

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
	Name string
	// Size is how many steps hold the lock at once. A lock sized from
	// quota (FromQueue set) has 0 here as loaded: admission.SizeLocks
	// computes it, and render, explain, plan, status and verify read the
	// policy it returns.
	Size int64
	// FromQueue sizes the lock from quota (#QueueAdmits); nil for a lock
	// of a fixed size.
	FromQueue   *QueueAdmits
	TakenBefore []string
	Description string
}

// QueueAdmits sizes a lock from quota (schema #QueueAdmits): as many jobs
// of a template as a ClusterQueue admits at once without preempting
// anything, in one service state.
type QueueAdmits struct {
	// Queue is the ClusterQueue (fromQueue).
	Queue string
	// Template is the step template whose default request each job asks;
	// "" for the templates that take the lock through Queue, which must
	// ask one request on one card.
	Template string
	// State maps every on-demand service to ServiceUp or ServiceDown, plus
	// any name the policy wrote that is no on-demand service (vet reports
	// it as unknown-reference).
	State map[string]string
	// Named is the state as the policy wrote it when it wrote a word
	// (StateOnDemandDown, StateOnDemandUp); NamedServices, sorted, are the
	// services it named otherwise.
	Named         string
	NamedServices []string
}

// The words a lock's size from quota may use for its service state.
const (
	// StateOnDemandDown: every on-demand service down (the default).
	StateOnDemandDown = "on-demand-down"
	// StateOnDemandUp: every on-demand service up.
	StateOnDemandUp = "on-demand-up"
)

// Template is a GPU step WorkflowTemplate.
type Template struct {
	Name      string
	Namespace string
	Queue     string
	Card      string
	// AnyCard leaves the card to Kueue: no card nodeLabels on the pod, so
	// Kueue assigns the first of the queue's cards that fits
	// (Policy.CardChoice). Card is then the card the step is sized for.
	AnyCard bool
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
	// Exclusive makes the step get its card to itself by quota (schema
	// #Template.exclusive); nil for a step that shares the card. As
	// loaded, Request is the template's own; admission.SizeLocks replaces
	// its shares and GPU memory with what the always-on services leave.
	Exclusive *Exclusive
}

// Exclusive is what the policy says about an exclusive step template.
type Exclusive struct {
	// Jobs is ExclusiveWait or ExclusiveEvict: what the step does about
	// the GPU jobs running when it arrives.
	Jobs string
	// Sized is true once admission.SizeLocks has set the template's
	// request to every share and all the GPU memory the always-on
	// services leave its queue on its card.
	Sized bool
}

// What an exclusive step does about the GPU jobs running when it arrives
// (Exclusive.Jobs).
const (
	// ExclusiveWait: it waits for every running job to end.
	ExclusiveWait = "wait"
	// ExclusiveEvict: it evicts the running jobs of a lower priority
	// (Kueue's preemption) and waits for the others.
	ExclusiveEvict = "evict"
)

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
	// FailRequestsGreaterThanOne is the plugin's time-slicing option: a
	// container asking more than one share is refused at allocation
	// (NvidiaDevicePlugin.Allocate, internal/plugin/server.go: "request
	// for 'nvidia.com/gpu: 2' too large: maximum request size for shared
	// resources is 1"), and the kubelet fails the pod with
	// UnexpectedAdmissionError. False, the plugin's default, hands out as
	// many replicas as asked.
	FailRequestsGreaterThanOne bool
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
