package admission_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// policyOnce is a policy loaded through CUE once per test binary; tests
// copy it before changing it.
type policyOnce struct {
	once sync.Once
	p    *policy.Policy
	err  error
}

// get loads the policy the first time (load) and returns it; what names it
// in the failure.
func (o *policyOnce) get(t testing.TB, what string, load func() (*policy.Policy, error)) *policy.Policy {
	t.Helper()
	o.once.Do(func() { o.p, o.err = load() })
	if o.err != nil {
		t.Fatalf("loading %s: %v", what, o.err)
	}
	return o.p
}

var labOnce policyOnce

// loadLab loads policies/lab through CUE once per test binary.
func loadLab(t testing.TB) *policy.Policy {
	t.Helper()
	return labOnce.get(t, "the lab policy", func() (*policy.Policy, error) { return policy.Load("../../policies/lab") })
}

func explain(t testing.TB, p *policy.Policy) *admission.Report {
	t.Helper()
	r, err := admission.Explain(p)
	if err != nil {
		t.Fatalf("Explain: %v", err)
	}
	return r
}

// row finds the capacity row of a template, priority and state (state
// given as the on-demand services that are up).
func row(t testing.TB, r *admission.Report, template, priority string, up ...string) admission.Capacity {
	t.Helper()
	isUp := map[string]bool{}
	for _, s := range up {
		isUp[s] = true
	}
rows:
	for _, c := range r.Capacity {
		if c.Template != template || c.Priority != priority {
			continue
		}
		for _, s := range r.OnDemand {
			if (c.State[s] == "up") != isUp[s] {
				continue rows
			}
		}
		return c
	}
	t.Fatalf("no row for %s at %s with %v up", template, priority, up)
	return admission.Capacity{}
}

func findings(r *admission.Report, rule string) []finding.Finding {
	var out []finding.Finding
	for _, f := range r.Findings {
		if f.Rule == rule {
			out = append(out, f)
		}
	}
	return out
}

func findingAt(t testing.TB, r *admission.Report, rule, path string) finding.Finding {
	t.Helper()
	for _, f := range r.Findings {
		if f.Rule == rule && f.Path == path {
			return f
		}
	}
	t.Fatalf("no %s finding at %s; findings:\n%s", rule, path, dumpFindings(r))
	return finding.Finding{}
}

func dumpFindings(r *admission.Report) string {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString(string(f.Severity) + " " + f.Rule + " " + f.Path + ": " + f.Message + "\n")
	}
	return b.String()
}

func mustContain(t testing.TB, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not say %q:\n%s", what, sub, s)
		}
	}
}

// TestLab checks the numbers the design hand-checked from the write-ups.
func TestLab(t *testing.T) {
	r := explain(t, loadLab(t))
	// The lab takes no Argo lock: gpu-step-no-cache (no model-store mount)
	// has the same quota and locks as gpu-step, so it shares gpu-step's rows.
	const noCache, step, llm = "gpu-step-no-cache", "gpu-step", "qwen2-5-7b"

	t.Run("batch with the 7B down: 4, shares and host memory bind", func(t *testing.T) {
		c := row(t, r, step, "batch")
		if c.Admitted != 4 || c.QuotaAdmits != 4 {
			t.Errorf("admitted %d (quota %d), want 4", c.Admitted, c.QuotaAdmits)
		}
		if want := []string{"nvidia.com/gpu", "memory"}; !slices.Equal(c.Binding, want) {
			t.Errorf("binding %v, want %v", c.Binding, want)
		}
		// (12 - 4) / 2 = 4 and 8 - 4 = 4; GPU memory would allow more.
		if c.PerResource["nvidia.com/gpu"] != 4 || c.PerResource["memory"] != 4 || c.PerResource["gpupolicy.dev/gpu-memory"] <= 4 {
			t.Errorf("per resource %v, want shares 4, memory 4, GPU memory > 4", c.PerResource)
		}
		if c.Margin["nvidia.com/gpu"] != "0" || c.Margin["memory"] != "0" || c.Margin["gpupolicy.dev/gpu-memory"] != "8508Mi" {
			t.Errorf("margin %v, want 0 shares, 0 memory, 8508Mi GPU memory", c.Margin)
		}
		if c.Lock != nil {
			t.Errorf("lock %+v, want none: Kueue alone gates the lab's steps", c.Lock)
		}
	})

	t.Run("batch with the 7B up: 0, GPU memory binds with 404 MiB left, no preemption", func(t *testing.T) {
		c := row(t, r, step, "batch", llm)
		if c.Admitted != 0 || c.QuotaAdmits != 0 {
			t.Errorf("admitted %d, want 0", c.Admitted)
		}
		if want := []string{"gpupolicy.dev/gpu-memory"}; !slices.Equal(c.Binding, want) {
			t.Errorf("binding %v, want %v", c.Binding, want)
		}
		// 16311 - 3707 (services) - 12200 (the 7B) = 404.
		if got := c.Margin["gpupolicy.dev/gpu-memory"]; got != "404Mi" {
			t.Errorf("GPU-memory margin %q, want 404Mi", got)
		}
		if c.Preemption != nil {
			t.Errorf("batch admitted by preemption %+v; batch preempts nothing", c.Preemption)
		}
		// No lock slots held by jobs Kueue does not admit: there is no lock.
		if c.Lock != nil {
			t.Errorf("lock %+v, want none", c.Lock)
		}
	})

	t.Run("training with the 7B up: admitted by reclaiming the borrowed share", func(t *testing.T) {
		c := row(t, r, step, "training", llm)
		if c.QuotaAdmits != 0 {
			t.Errorf("admitted %d without preemption, want 0", c.QuotaAdmits)
		}
		if c.Preemption == nil {
			t.Fatal("no preemption path; want the 7B reclaimed")
		}
		if c.Preemption.Admitted != 4 {
			t.Errorf("admitted %d by preemption, want 4", c.Preemption.Admitted)
		}
		if len(c.Preemption.Evicts) != 1 {
			t.Fatalf("evicts %+v, want the 7B only", c.Preemption.Evicts)
		}
		ev := c.Preemption.Evicts[0]
		if ev.Service != llm || ev.Queue != "gpu-large-model" || ev.Reason != admission.ReasonInCohortReclamation || ev.Policy != "reclaimWithinCohort" {
			t.Errorf("eviction %+v, want qwen2-5-7b by reclaimWithinCohort (InCohortReclamation)", ev)
		}
	})

	t.Run("no cache lock: cache-mounting jobs run four at once, the cache-free variant shares the row", func(t *testing.T) {
		c := row(t, r, step, "batch")
		if c.Admitted != 4 || c.BoundBy == "lock" {
			t.Errorf("admitted %d bound by %s, want 4 bound by the quota", c.Admitted, c.BoundBy)
		}
		for _, c := range r.Capacity {
			if c.Template == noCache {
				t.Fatalf("a row of its own for %s, which takes the same locks (none) as %s", noCache, step)
			}
		}
	})

	t.Run("dead preemption: a waking 7B does not evict batch jobs", func(t *testing.T) {
		f := findingAt(t, r, "dead-preemption", `queues."gpu-large-model".preemption.borrowWithinCohort`)
		if f.Severity != finding.Error {
			t.Errorf("severity %s, want error", f.Severity)
		}
		mustContain(t, "dead-preemption", f.Message, "10171", "above their nominal quota", "gpu-general",
			"a waking qwen2-5-7b waits", "batch jobs finish")
		if !strings.HasPrefix(f.Pos, "policies/lab/queues.cue:") && !strings.HasPrefix(f.Pos, "../../policies/lab/queues.cue:") {
			t.Errorf("pos %q, want a position in queues.cue", f.Pos)
		}
		// The live paths are not reported dead.
		for _, g := range findings(r, "dead-preemption") {
			if strings.Contains(g.Path, "gpu-general") {
				t.Errorf("gpu-general's preemption reported dead: %s", g.Message)
			}
		}
	})

	t.Run("the lab's queues pass Kueue's preemption validation", func(t *testing.T) {
		if fs := findings(r, "preemption-rejected"); len(fs) != 0 {
			t.Errorf("preemption-rejected on the lab: %v", fs)
		}
		// Without reclaimWithinCohort, Kueue's CEL rule rejects the queue.
		p := admissiontest.Lab().Obj()
		q := p.Queues["gpu-large-model"]
		q.Preemption.ReclaimWithinCohort = "Never"
		p.Queues["gpu-large-model"] = q
		f := findingAt(t, explain(t, p), "preemption-rejected", `queues."gpu-large-model".preemption`)
		mustContain(t, "preemption-rejected", f.Message, "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
	})

	t.Run("batch starves while the 7B is up", func(t *testing.T) {
		f := findingAt(t, r, "starvation", "priorities.batch")
		if f.Severity != finding.Warning {
			t.Errorf("severity %s, want warning (the wait ends when the 7B scales down)", f.Severity)
		}
		mustContain(t, "starvation", f.Message, "while qwen2-5-7b is up", "404 MiB", "1,024 MiB",
			"activeDeadlineSeconds 3600 s", "does not count", "a pod Kueue holds never starts",
			"qwen2-5-7b scales down, 3600 s after its last request", "indefinitely")
		for _, g := range findings(r, "starvation") {
			if g.Path == "priorities.training" || g.Path == `priorities."always-on"` {
				t.Errorf("%s reported starving; it reclaims the 7B", g.Path)
			}
		}
	})

	t.Run("declared against physical", func(t *testing.T) {
		f := findingAt(t, r, "declared-physical", `cards."rtx-5060-ti".memoryMiB`)
		if f.Severity != finding.Info {
			t.Errorf("severity %s, want info: the quotas never exceed the card", f.Severity)
		}
		mustContain(t, "declared-physical", f.Message, "16,311 MiB", "isolates none", "not a limit")
	})

	t.Run("no lock: Kueue alone gates, and explain says what that keeps and loses", func(t *testing.T) {
		if fs := findings(r, "lock-capacity"); len(fs) != 0 {
			t.Errorf("lock-capacity on a lab without locks: %v", fs)
		}
		f := findingAt(t, r, "kueue-alone", `templates."gpu-step".locks`)
		if f.Severity != finding.Info {
			t.Errorf("severity %s, want info", f.Severity)
		}
		mustContain(t, "kueue-alone", f.Message, "gpu-step and gpu-step-no-cache take no Argo lock",
			"at most 4 at once, while qwen2-5-7b is down", "Kept: every admission number",
			"lock-capacity cannot arise", "DEFAULT_REQUEUE_TIME, 10 s", "Lost: a lock to turn down to one")
		if !strings.HasPrefix(f.Pos, "policies/lab/templates.cue:") && !strings.HasPrefix(f.Pos, "../../policies/lab/templates.cue:") {
			t.Errorf("pos %q, want a position in templates.cue", f.Pos)
		}
		if n := len(findings(r, "kueue-alone")); n != 1 {
			t.Errorf("%d kueue-alone findings, want 1 (the two variants share it)", n)
		}
	})

	if !r.HasErrors() {
		t.Error("the lab has error findings (dead preemption); HasErrors says none")
	}
}

// TestLabBuilderMatchesCUE keeps admissiontest.Lab equal to policies/lab:
// the same report, positions aside.
func TestLabBuilderMatchesCUE(t *testing.T) {
	fromCUE := explain(t, loadLab(t))
	fromGo := explain(t, admissiontest.Lab().Obj())
	for i := range fromCUE.Findings {
		fromCUE.Findings[i].Pos = ""
	}
	a, _ := json.Marshal(fromCUE)
	b, _ := json.Marshal(fromGo)
	if !bytes.Equal(a, b) {
		i := 0
		for i < len(a) && i < len(b) && a[i] == b[i] {
			i++
		}
		from := max(0, i-200)
		t.Errorf("admissiontest.Lab() and policies/lab differ at byte %d:\nCUE: …%s\nGo:  …%s", i, a[from:min(len(a), i+200)], b[from:min(len(b), i+200)])
	}
}

func TestExplainDeterministic(t *testing.T) {
	p := loadLab(t)
	var first []byte
	for i := 0; i < 5; i++ {
		var buf bytes.Buffer
		if err := explain(t, p).WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = buf.Bytes()
		} else if !bytes.Equal(first, buf.Bytes()) {
			t.Fatal("two runs of Explain on one policy gave different JSON")
		}
	}
	var buf bytes.Buffer
	explain(t, p).WriteText(&buf)
	a := buf.String()
	buf.Reset()
	explain(t, p).WriteMarkdown(&buf)
	if a == "" || buf.Len() == 0 {
		t.Fatal("empty text or markdown")
	}
}

// TestLabLockOfFourNeverBound is why the lab dropped its Argo lock: the
// series' main lock of 4, in front of both variants, admits exactly what
// the quota admits in every row (it is never tighter), and with the 7B up
// its slots are held by batch jobs Kueue does not admit (lock-capacity),
// which the lock-free lab cannot have.
func TestLabLockOfFourNeverBound(t *testing.T) {
	p := admissiontest.Lab().Obj()
	p.Locks = map[string]policy.Lock{"main": {Name: "main", Size: 4}}
	st := p.Templates["gpu-step"]
	st.Locks = []string{"main"}
	cf := *st.CacheFree
	cf.Locks = []string{"main"}
	st.CacheFree = &cf
	p.Templates["gpu-step"] = st
	withLock := explain(t, p)
	without := explain(t, loadLab(t))
	n := 0
	for _, c := range withLock.Capacity {
		if c.Template != "gpu-step" {
			continue
		}
		var up []string
		if c.State["qwen2-5-7b"] == "up" {
			up = append(up, "qwen2-5-7b")
		}
		k := row(t, without, "gpu-step", c.Priority, up...)
		if c.Admitted != k.Admitted {
			t.Errorf("%s with %v up: %d at once behind the lock of 4, %d with Kueue alone", c.Priority, up, c.Admitted, k.Admitted)
		}
		if c.Preemption != nil && (k.Preemption == nil || c.Preemption.Admitted != k.Preemption.Admitted) {
			t.Errorf("%s with %v up: preemption %+v behind the lock, %+v with Kueue alone", c.Priority, up, c.Preemption, k.Preemption)
		}
		if c.Lock == nil || c.Lock.Effect == "limits" {
			t.Errorf("%s with %v up: lock %+v, want one that never limits", c.Priority, up, c.Lock)
		}
		n++
	}
	if n != 8 {
		t.Errorf("%d rows compared, want 8 (4 priorities × the 7B up or down)", n)
	}
	if len(findings(withLock, "lock-capacity")) == 0 {
		t.Error("the lock of 4 with the 7B up: no lock-capacity warning")
	}
	if len(findings(without, "lock-capacity")) != 0 {
		t.Error("lock-capacity on the lock-free lab")
	}
}

// TestLabGateWithoutRows: the headline says what stands in front of Kueue
// from the policy, also when no per-state row is enumerated (--states none).
func TestLabGateWithoutRows(t *testing.T) {
	for _, mode := range []string{admission.StatesAuto, admission.StatesNone} {
		r, err := admission.ExplainWith(loadLab(t), admission.Options{States: mode})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := r.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if first, _, _ := strings.Cut(b.String(), "\n"); !strings.HasSuffix(first, "(kueue v0.17 classical preemption, no Argo lock: Kueue alone gates)") {
			t.Errorf("states %s: headline %q", mode, first)
		}
	}
}
