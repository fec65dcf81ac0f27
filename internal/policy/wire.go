package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// The wire types mirror the CUE schema's JSON; model() turns them into the
// typed model. Keep them in step with schema/policy.cue (the decoder rejects
// unknown fields, so a drift between the two fails loudly in tests).

type wirePolicy struct {
	Name                string `json:"name"`
	DeclarationResource string `json:"declarationResource"`
	Defaults            struct {
		GPUMemory gpuMem `json:"gpuMemory"`
	} `json:"defaults"`
	Cards      map[string]wireCard     `json:"cards"`
	Services   map[string]wireService  `json:"services"`
	Queues     map[string]wireQueue    `json:"queues"`
	Cohorts    map[string]wireCohort   `json:"cohorts"`
	Priorities map[string]Priority     `json:"priorities"`
	Locks      map[string]wireLock     `json:"locks"`
	Templates  map[string]wireTemplate `json:"templates"`
	Access     map[string]wireAccess   `json:"access"`
	Argo       struct {
		SemaphoreConfigMap string `json:"semaphoreConfigMap"`
	} `json:"argo"`
	DevicePlugin struct {
		Namespace       string `json:"namespace"`
		ConfigMap       string `json:"configMap"`
		RenameByDefault bool   `json:"renameByDefault"`
		// FailRequestsGreaterThanOne is the time-slicing option.
		FailRequestsGreaterThanOne bool `json:"failRequestsGreaterThanOne"`
	} `json:"devicePlugin"`
}

type wireAccess struct {
	Priorities *[]string `json:"priorities"`
	Queues     *[]string `json:"queues"`
}

type wireCard struct {
	Model      string            `json:"model"`
	MemoryMiB  int64             `json:"memoryMiB"`
	Shares     int64             `json:"shares"`
	NodeLabels map[string]string `json:"nodeLabels"`
	Nodes      struct {
		Selector     string `json:"selector"`
		CardsPerNode int64  `json:"cardsPerNode"`
	} `json:"nodes"`
}

type wireService struct {
	Mode                 string `json:"mode"`
	IdleScaleDownSeconds int64  `json:"idleScaleDownSeconds"`
	LastActivity         *struct {
		On         string `json:"on"`
		Annotation string `json:"annotation"`
		Label      string `json:"label"`
		Format     string `json:"format"`
	} `json:"lastActivity"`
	Namespace   string  `json:"namespace"`
	Queue       string  `json:"queue"`
	Priority    string  `json:"priority"`
	Card        string  `json:"card"`
	Shares      int64   `json:"shares"`
	HostMemory  hostMem `json:"hostMemory"`
	GPUMemory   gpuMem  `json:"gpuMemory"`
	Description string  `json:"description"`
}

type wireQueue struct {
	Cohort     string         `json:"cohort"`
	Namespaces []string       `json:"namespaces"`
	LocalQueue string         `json:"localQueue"`
	Flavors    wireFlavors    `json:"flavors"`
	Preemption wirePreemption `json:"preemption"`
	// FlavorFungibility is nil when the policy leaves it out.
	FlavorFungibility *FlavorFungibility `json:"flavorFungibility"`
	// QueueingStrategy is "BestEffortFIFO" or "StrictFIFO".
	QueueingStrategy string `json:"queueingStrategy"`
}

type wireFlavor struct {
	Shares struct {
		NominalQuota   int64  `json:"nominalQuota"`
		BorrowingLimit *int64 `json:"borrowingLimit"`
		LendingLimit   *int64 `json:"lendingLimit"`
	} `json:"shares"`
	HostMemory struct {
		NominalQuota   hostMem  `json:"nominalQuota"`
		BorrowingLimit *hostMem `json:"borrowingLimit"`
		LendingLimit   *hostMem `json:"lendingLimit"`
	} `json:"hostMemory"`
	GPUMemory struct {
		NominalQuota   gpuMem  `json:"nominalQuota"`
		BorrowingLimit *gpuMem `json:"borrowingLimit"`
		LendingLimit   *gpuMem `json:"lendingLimit"`
	} `json:"gpuMemory"`
}

type wirePreemption struct {
	WithinClusterQueue  string `json:"withinClusterQueue"`
	ReclaimWithinCohort string `json:"reclaimWithinCohort"`
	BorrowWithinCohort  struct {
		Policy               string `json:"policy"`
		MaxPriorityThreshold string `json:"maxPriorityThreshold"`
	} `json:"borrowWithinCohort"`
}

type wireLock struct {
	Size        wireLockSize `json:"size"`
	TakenBefore []string     `json:"takenBefore"`
	Description string       `json:"description"`
}

// wireLockSize is a lock's size as the policy writes it: a number, or
// #QueueAdmits (sized from quota).
type wireLockSize struct {
	N    int64
	From *wireQueueAdmits
}

type wireQueueAdmits struct {
	FromQueue string `json:"fromQueue"`
	Template  string `json:"template"`
	// State is "on-demand-down", "on-demand-up" or {SERVICE: "up"|"down"}.
	State json.RawMessage `json:"state"`
}

func (s *wireLockSize) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &s.N); err == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	s.From = &wireQueueAdmits{}
	return dec.Decode(s.From)
}

// queueAdmits is the model of a size from quota: the state resolved over
// the policy's on-demand services (onDemand), those the policy does not
// name down; a name that is no on-demand service is kept for vet's
// unknown-reference.
func (w *wireQueueAdmits) queueAdmits(onDemand []string) *QueueAdmits {
	q := &QueueAdmits{Queue: w.FromQueue, Template: w.Template, State: map[string]string{}}
	var all string
	if err := json.Unmarshal(w.State, &all); err == nil {
		q.Named = all
		each := ServiceDown
		if all == StateOnDemandUp {
			each = ServiceUp
		}
		for _, n := range onDemand {
			q.State[n] = each
		}
		return q
	}
	// The schema admits nothing else: a map of services to up or down.
	var named map[string]string
	_ = json.Unmarshal(w.State, &named)
	for _, n := range onDemand {
		q.State[n] = ServiceDown
	}
	for n, s := range named {
		q.State[n] = s
		q.NamedServices = append(q.NamedServices, n)
	}
	slices.Sort(q.NamedServices)
	return q
}

type wireTemplate struct {
	Namespace        string   `json:"namespace"`
	Queue            string   `json:"queue"`
	Card             string   `json:"card"`
	AnyCard          bool     `json:"anyCard"`
	Priority         string   `json:"priority"`
	Locks            []string `json:"locks"`
	Image            string   `json:"image"`
	Command          []string `json:"command"`
	Shares           int64    `json:"shares"`
	HostMemory       hostMem  `json:"hostMemory"`
	GPUMemory        gpuMem   `json:"gpuMemory"`
	TimeLimitSeconds int64    `json:"timeLimitSeconds"`
	ModelCache       *struct {
		Claim     string `json:"claim"`
		MountPath string `json:"mountPath"`
		ReadOnly  bool   `json:"readOnly"`
	} `json:"modelCache"`
	CacheFree *struct {
		Name  string   `json:"name"`
		Locks []string `json:"locks"`
	} `json:"cacheFree"`
	Exclusive *struct {
		Jobs string `json:"jobs"`
	} `json:"exclusive"`
}

// gpuMem is a GPU-memory quantity as the policy writes it: a plain integer
// (MiB: the one place a plain integer is MiB) or "NMi" (parseGPUMemory).
type gpuMem struct {
	MiB      int64
	Suffixed bool
}

func (g *gpuMem) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		g.MiB, g.Suffixed = n, false // a plain integer in a policy is MiB
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("GPU memory must be an integer (MiB) or \"NMi\": %s", b)
	}
	mib, err := parseGPUMemory(s)
	if err != nil {
		return err
	}
	g.MiB, g.Suffixed = mib, s != "0"
	return nil
}

// hostMem is a host-memory quantity "NMi", "NGi" or "0", held in MiB.
type hostMem struct{ MiB int64 }

func (h *hostMem) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("host memory must be a quantity string such as \"2Gi\": %s", b)
	}
	mib, err := ParseMiB(s)
	if err != nil {
		return err
	}
	h.MiB = mib
	return nil
}

func (w *wirePolicy) model() *Policy {
	p := &Policy{
		Name:                w.Name,
		DeclarationResource: w.DeclarationResource,
		DefaultGPUMemoryMiB: w.Defaults.GPUMemory.MiB,
		Cards:               map[string]Card{},
		Services:            map[string]Service{},
		Queues:              map[string]ClusterQueue{},
		Priorities:          map[string]Priority{},
		Locks:               map[string]Lock{},
		Templates:           map[string]Template{},
		SemaphoreConfigMap:  w.Argo.SemaphoreConfigMap,
		DevicePlugin: DevicePlugin{
			Namespace:       w.DevicePlugin.Namespace,
			ConfigMap:       w.DevicePlugin.ConfigMap,
			RenameByDefault: w.DevicePlugin.RenameByDefault,

			FailRequestsGreaterThanOne: w.DevicePlugin.FailRequestsGreaterThanOne,
		},
	}
	form := func(g gpuMem, path ...string) {
		if g.MiB == 0 {
			return // a bare zero carries no unit
		}
		p.GPUMemoryForms = append(p.GPUMemoryForms, QuantityForm{Path: path, MiB: g.MiB, Suffixed: g.Suffixed})
	}
	form(w.Defaults.GPUMemory, "defaults", "gpuMemory")
	for n, c := range w.Cards {
		p.Cards[n] = Card{Name: n, Model: c.Model, MemoryMiB: c.MemoryMiB, Shares: c.Shares, NodeLabels: c.NodeLabels,
			NodeSelector: c.Nodes.Selector, CardsPerNode: c.Nodes.CardsPerNode}
	}
	for n, s := range w.Services {
		p.Services[n] = Service{
			Name: n, Mode: ServiceMode(s.Mode), Description: s.Description,
			IdleScaleDownSeconds: s.IdleScaleDownSeconds,
			Namespace:            s.Namespace, Queue: s.Queue, Priority: s.Priority, Card: s.Card,
			Request: Request{Shares: s.Shares, HostMemoryMiB: s.HostMemory.MiB, GPUMemoryMiB: s.GPUMemory.MiB},
		}
		if la := s.LastActivity; la != nil {
			sv := p.Services[n]
			sv.LastActivity = LastActivity{On: la.On, Annotation: la.Annotation, Label: la.Label, Format: la.Format}
			p.Services[n] = sv
		}
		form(s.GPUMemory, "services", n, "gpuMemory")
	}
	for n, q := range w.Queues {
		cq := ClusterQueue{
			Name: n, Cohort: q.Cohort, Namespaces: q.Namespaces, LocalQueue: q.LocalQueue,
			Flavors: map[string]FlavorQuotas{},
			Preemption: Preemption{
				WithinClusterQueue:   q.Preemption.WithinClusterQueue,
				ReclaimWithinCohort:  q.Preemption.ReclaimWithinCohort,
				BorrowWithinCohort:   q.Preemption.BorrowWithinCohort.Policy,
				MaxPriorityThreshold: q.Preemption.BorrowWithinCohort.MaxPriorityThreshold,
			},
			QueueingStrategy: q.QueueingStrategy,
		}
		if cq.LocalQueue == "" {
			cq.LocalQueue = n
		}
		cq.FlavorOrder = q.Flavors.order
		if q.FlavorFungibility != nil {
			cq.FlavorFungibility = *q.FlavorFungibility
		}
		for fn, f := range q.Flavors.m {
			cq.Flavors[fn] = f.quotas()
			f.forms(form, "queues", n, "flavors", fn, "gpuMemory")
		}
		p.Queues[n] = cq
	}
	w.cohortsInto(p, form)
	for n, pr := range w.Priorities {
		pr.Name = n
		p.Priorities[n] = pr
	}
	onDemand := p.OnDemandServices()
	for n, l := range w.Locks {
		lk := Lock{Name: n, Size: l.Size.N, TakenBefore: l.TakenBefore, Description: l.Description}
		if l.Size.From != nil {
			lk.FromQueue = l.Size.From.queueAdmits(onDemand)
		}
		p.Locks[n] = lk
	}
	def := p.DefaultPriority()
	for n, t := range w.Templates {
		tt := Template{
			Name: n, Namespace: t.Namespace, Queue: t.Queue, Card: t.Card, AnyCard: t.AnyCard, Priority: t.Priority,
			Locks: t.Locks, Image: t.Image, Command: t.Command,
			Request:          Request{Shares: t.Shares, HostMemoryMiB: t.HostMemory.MiB, GPUMemoryMiB: t.GPUMemory.MiB},
			TimeLimitSeconds: t.TimeLimitSeconds,
		}
		if tt.Priority == "" {
			tt.Priority = def
		}
		if t.ModelCache != nil {
			tt.ModelCache = &ModelCache{Claim: t.ModelCache.Claim, MountPath: t.ModelCache.MountPath, ReadOnly: t.ModelCache.ReadOnly}
		}
		if t.CacheFree != nil {
			tt.CacheFree = &CacheFree{Name: t.CacheFree.Name, Locks: t.CacheFree.Locks}
		}
		if t.Exclusive != nil {
			tt.Exclusive = &Exclusive{Jobs: t.Exclusive.Jobs}
		}
		p.Templates[n] = tt
		form(t.GPUMemory, "templates", n, "gpuMemory")
	}
	for ns, a := range w.Access {
		if p.Access == nil {
			p.Access = map[string]Access{}
		}
		acc := Access{Namespace: ns}
		if a.Priorities != nil {
			acc.Priorities, acc.PrioritiesStated = *a.Priorities, true
		}
		if a.Queues != nil {
			acc.Queues, acc.QueuesStated = *a.Queues, true
		}
		p.Access[ns] = acc
	}
	return p
}

// quotas is the flavor's quotas in the model's units (shares, MiB).
func (f wireFlavor) quotas() FlavorQuotas {
	return FlavorQuotas{
		Shares: Quota{Nominal: f.Shares.NominalQuota, BorrowingLimit: f.Shares.BorrowingLimit, LendingLimit: f.Shares.LendingLimit},
		HostMemory: Quota{Nominal: f.HostMemory.NominalQuota.MiB,
			BorrowingLimit: hostPtr(f.HostMemory.BorrowingLimit), LendingLimit: hostPtr(f.HostMemory.LendingLimit)},
		GPUMemory: Quota{Nominal: f.GPUMemory.NominalQuota.MiB,
			BorrowingLimit: gpuPtr(f.GPUMemory.BorrowingLimit), LendingLimit: gpuPtr(f.GPUMemory.LendingLimit)},
	}
}

// forms records how the flavor's GPU-memory quotas were written, under
// base (the path of its gpuMemory field).
func (f wireFlavor) forms(form func(g gpuMem, path ...string), base ...string) {
	form(f.GPUMemory.NominalQuota, append(base, "nominalQuota")...)
	if f.GPUMemory.BorrowingLimit != nil {
		form(*f.GPUMemory.BorrowingLimit, append(base, "borrowingLimit")...)
	}
	if f.GPUMemory.LendingLimit != nil {
		form(*f.GPUMemory.LendingLimit, append(base, "lendingLimit")...)
	}
}

func hostPtr(h *hostMem) *int64 {
	if h == nil {
		return nil
	}
	v := h.MiB
	return &v
}

func gpuPtr(g *gpuMem) *int64 {
	if g == nil {
		return nil
	}
	v := g.MiB
	return &v
}
