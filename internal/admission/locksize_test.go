package admission_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

var seriesOnce policyOnce

// loadSeries loads the lab with the locks and template of the write-ups'
// series (cmd/gpupolicy/testdata/lab-series: the main lock sized from the
// general queue's quota with the on-demand services down, the cache lock
// of 1), through CUE, once per test binary. Tests copy it before changing
// it (withMain, withGeneral).
func loadSeries(t testing.TB) *policy.Policy {
	t.Helper()
	return seriesOnce.get(t, "the series' lab", func() (*policy.Policy, error) {
		dir, err := os.MkdirTemp("", "lab-series-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		for _, src := range []string{"../../policies/lab", "../../cmd/gpupolicy/testdata/lab-series"} {
			files, err := filepath.Glob(filepath.Join(src, "*.cue"))
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err == nil {
					err = os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
				}
				if err != nil {
					return nil, err
				}
			}
		}
		return policy.Load(dir)
	})
}

// withMain is p with the main lock's size from quota replaced by q.
func withMain(p *policy.Policy, q policy.QueueAdmits) *policy.Policy {
	out := *p
	out.Locks = maps.Clone(p.Locks)
	l := out.Locks["main"]
	l.FromQueue = &q
	out.Locks["main"] = l
	return &out
}

// withGeneral is p with the general queue's rtx-5060-ti quota changed by f.
func withGeneral(p *policy.Policy, f func(*policy.FlavorQuotas)) *policy.Policy {
	out := *p
	out.Queues = maps.Clone(p.Queues)
	q := out.Queues["gpu-general"]
	q.Flavors = maps.Clone(q.Flavors)
	fq := q.Flavors["rtx-5060-ti"]
	f(&fq)
	q.Flavors["rtx-5060-ti"] = fq
	out.Queues["gpu-general"] = q
	return &out
}

func sizeOne(t *testing.T, p *policy.Policy) (*policy.Policy, admission.LockSize) {
	t.Helper()
	sized, sizes, err := admission.SizeLocks(p)
	if err != nil {
		t.Fatalf("SizeLocks: %v", err)
	}
	if len(sizes) != 1 || sizes[0].Lock != "main" {
		t.Fatalf("sizes %+v, want the main lock alone", sizes)
	}
	return sized, sizes[0]
}

// The series' main lock, written as what the general queue admits with the
// 7B down, is the 4 the write-up sized by hand: of the 8 shares the
// always-on models hold 4, and of the 12 GiB of host memory 4 GiB, at
// 2 GiB a job; GPU memory would allow 12.
func TestLockSizedFromQuotaIsFour(t *testing.T) {
	p := loadSeries(t)
	if q := p.Locks["main"].FromQueue; q == nil || q.Queue != "gpu-general" || q.Named != policy.StateOnDemandDown || q.State["qwen2-5-7b"] != policy.ServiceDown {
		t.Fatalf("the main lock as loaded: %+v", p.Locks["main"])
	}
	sized, ls := sizeOne(t, p)
	if ls.Size != 4 || sized.Locks["main"].Size != 4 {
		t.Errorf("main lock %d (policy %d), want 4", ls.Size, sized.Locks["main"].Size)
	}
	if !slices.Equal(ls.Binding, []string{"nvidia.com/gpu", "memory"}) {
		t.Errorf("binding %v, want shares and host memory", ls.Binding)
	}
	if ls.Template != "gpu-step" || ls.Request["gpupolicy.dev/gpu-memory"] != "1Gi" || ls.Request["memory"] != "2Gi" || ls.Request["nvidia.com/gpu"] != "1" {
		t.Errorf("jobs of %s asking %v", ls.Template, ls.Request)
	}
	const words = "lock main: 4 = jobs of gpu-step (1 share, 2,048 MiB host memory, 1,024 MiB GPU memory) ClusterQueue gpu-general admits at once with every on-demand service down (qwen2-5-7b); the next does not fit in nvidia.com/gpu, memory"
	if ls.Words != words {
		t.Errorf("words:\n%s\nwant\n%s", ls.Words, words)
	}
	// The policy SizeLocks was given is left as it was; the cache lock keeps
	// its number.
	if p.Locks["main"].Size != 0 || sized.Locks["cache"].Size != 1 {
		t.Errorf("main lock in the input %d, cache lock %d", p.Locks["main"].Size, sized.Locks["cache"].Size)
	}
	// Sizing the sized policy again gives the same.
	if _, again := sizeOne(t, sized); again.Size != 4 {
		t.Errorf("sized twice: %d", again.Size)
	}
	// A policy with no lock sized from quota and no exclusive template
	// comes back as it is.
	lab := loadLab(t)
	plain := *lab
	plain.Templates = map[string]policy.Template{"gpu-step": lab.Templates["gpu-step"]}
	if same, sizes, err := admission.SizeLocks(&plain); same != &plain || sizes != nil || err != nil {
		t.Errorf("SizeLocks(lab without vllm-bench) = %p, %v, %v; want the policy itself", same, sizes, err)
	}
}

// Explain uses the derived size (the cache-free variant's rows show the
// lock of 4 matching the quota's 4) and states the derivation.
func TestExplainStatesLockDerivation(t *testing.T) {
	r := explain(t, loadSeries(t))
	if len(r.LockSizes) != 1 || r.LockSizes[0].Size != 4 {
		t.Fatalf("lock sizes %+v", r.LockSizes)
	}
	c := row(t, r, "gpu-step-no-cache", "batch")
	if c.Lock == nil || c.Lock.Name != "main" || c.Lock.Size != 4 || c.Lock.Effect != "matches" || c.Admitted != 4 {
		t.Errorf("gpu-step-no-cache, batch, all down: %+v, lock %+v", c, c.Lock)
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "\nLocks sized from quota:\n  "+r.LockSizes[0].Words+"\n") {
		t.Errorf("text lacks the derivation:\n%s", text.String())
	}
}

// The lock follows the quota: each change of the general queue's
// nominalQuota moves it to what the binding resource then admits.
func TestLockSizeFollowsQuota(t *testing.T) {
	p := loadSeries(t)
	for _, tc := range []struct {
		name    string
		change  func(*policy.FlavorQuotas)
		size    int64
		binding []string
	}{
		// (10 − 4) GiB / 2 GiB a job.
		{"host memory 10 GiB", func(f *policy.FlavorQuotas) { f.HostMemory.Nominal = 10 * 1024 }, 3, []string{"memory"}},
		// 6 shares − the 4 always-on models hold.
		{"6 shares", func(f *policy.FlavorQuotas) { f.Shares.Nominal = 6 }, 2, []string{"nvidia.com/gpu"}},
		// (5,755 − the services' 3,707) MiB / 1,024 MiB a job.
		{"GPU memory 5,755 MiB", func(f *policy.FlavorQuotas) { f.GPUMemory.Nominal = 5755 }, 2, []string{"gpupolicy.dev/gpu-memory"}},
		// Host memory 16 GiB: 6 by memory, shares stop at 4.
		{"host memory 16 GiB", func(f *policy.FlavorQuotas) { f.HostMemory.Nominal = 16 * 1024 }, 4, []string{"nvidia.com/gpu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ls := sizeOne(t, withGeneral(p, tc.change))
			if ls.Size != tc.size || !slices.Equal(ls.Binding, tc.binding) {
				t.Errorf("main lock %d bound by %v, want %d by %v", ls.Size, ls.Binding, tc.size, tc.binding)
			}
		})
	}
}

// Sized with the 7B up, the general queue admits no job: the 7B borrows
// 12,200 MiB and leaves 404 MiB, under one job's 1,024 MiB. A lock of 0
// would let no step start: the error names the lock's size field.
func TestLockSizeZeroRefused(t *testing.T) {
	p := loadSeries(t)
	for _, q := range []policy.QueueAdmits{
		{Queue: "gpu-general", State: map[string]string{"qwen2-5-7b": policy.ServiceUp}, NamedServices: []string{"qwen2-5-7b"}},
		{Queue: "gpu-general", State: map[string]string{"qwen2-5-7b": policy.ServiceUp}, Named: policy.StateOnDemandUp},
	} {
		_, _, err := admission.SizeLocks(withMain(p, q))
		var ds finding.List
		if !errors.As(err, &ds) || len(ds) != 1 {
			t.Fatalf("state %v: err %v, want one finding", q.State, err)
		}
		f := ds[0]
		if f.Rule != admission.RuleLockFromQuota.ID || f.Severity != finding.Error || f.Path != "locks.main.size" || !strings.Contains(f.Pos, "locks.cue:") {
			t.Errorf("finding %+v", f)
		}
		if !strings.Contains(f.Message, "lock main: 0 = jobs of gpu-step") || !strings.Contains(f.Message, "not one fits in gpupolicy.dev/gpu-memory") {
			t.Errorf("message: %s", f.Message)
		}
		if _, err := admission.Explain(withMain(p, q)); !errors.As(err, &ds) {
			t.Errorf("Explain of a lock of 0: %v, want the finding", err)
		}
	}
}

// When templates of different requests take the lock through the queue,
// the one whose jobs size it must be named; named, each gives its own
// count (the eval job's 12,452 MiB: one at a time with the 7B down).
func TestLockSizeNeedsTemplate(t *testing.T) {
	p := loadSeries(t)
	out := *p
	out.Templates = maps.Clone(p.Templates)
	eval := p.Templates["gpu-step"]
	eval.Name, eval.CacheFree, eval.Locks = "eval-step", nil, []string{"cache", "main"}
	eval.Request.GPUMemoryMiB = 12452
	out.Templates["eval-step"] = eval
	_, _, err := admission.SizeLocks(&out)
	var ds finding.List
	if !errors.As(err, &ds) || len(ds) != 1 || !strings.Contains(ds[0].Message, "templates eval-step (1 share, 2,048 MiB host memory, 12,452 MiB GPU memory) and gpu-step (1 share, 2,048 MiB host memory, 1,024 MiB GPU memory) take it through queue gpu-general with different requests") {
		t.Fatalf("err %v", err)
	}
	down := map[string]string{"qwen2-5-7b": policy.ServiceDown}
	for tmpl, want := range map[string]int64{"gpu-step": 4, "eval-step": 1} {
		_, ls := sizeOne(t, withMain(&out, policy.QueueAdmits{Queue: "gpu-general", Template: tmpl, State: down, Named: policy.StateOnDemandDown}))
		if ls.Size != want {
			t.Errorf("sized by %s: %d, want %d", tmpl, ls.Size, want)
		}
	}
	// A template that runs through another queue cannot size it.
	_, _, err = admission.SizeLocks(withMain(&out, policy.QueueAdmits{Queue: "gpu-large-model", Template: "gpu-step", State: down}))
	if !errors.As(err, &ds) || !strings.Contains(ds[0].Message, "its jobs are gpu-step's, which run through queue gpu-general, not gpu-large-model") {
		t.Errorf("another queue: %v", err)
	}
}
