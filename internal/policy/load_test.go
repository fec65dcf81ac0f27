package policy

import (
	"slices"
	"testing"
)

func TestLoadLab(t *testing.T) {
	p, err := Load("../../policies/lab")
	if err != nil {
		t.Fatal(err)
	}
	card := p.Cards["rtx-5060-ti"]
	if card.MemoryMiB != 16311 || card.Shares != 8 {
		t.Errorf("card = %+v, want 16,311 MiB and 8 shares", card)
	}
	var alwaysOnShares, alwaysOnHost, alwaysOnGPU int64
	for _, s := range p.Services {
		if s.Mode == AlwaysOn {
			alwaysOnShares += s.Request.Shares
			alwaysOnHost += s.Request.HostMemoryMiB
			alwaysOnGPU += s.Request.GPUMemoryMiB
		}
	}
	if alwaysOnShares != 4 || alwaysOnHost != 4096 || alwaysOnGPU != 3707 {
		t.Errorf("always-on services hold %d shares, %d MiB host, %d MiB GPU; want 4, 4096, 3707", alwaysOnShares, alwaysOnHost, alwaysOnGPU)
	}
	qwen := p.Services["qwen2-5-7b"]
	if qwen.Mode != OnDemand || qwen.IdleScaleDownSeconds != 3600 || qwen.Queue != "gpu-large-model" || qwen.Request.GPUMemoryMiB != 12200 {
		t.Errorf("7B = %+v", qwen)
	}
	gen := p.Queues["gpu-general"].Flavors["rtx-5060-ti"]
	if gen.Shares.Nominal != 8 || gen.HostMemory.Nominal != 12*1024 || gen.GPUMemory.Nominal != 16311 {
		t.Errorf("gpu-general quotas = %+v", gen)
	}
	large := p.Queues["gpu-large-model"]
	lf := large.Flavors["rtx-5060-ti"]
	if lf.Shares.Nominal != 0 || *lf.Shares.BorrowingLimit != 1 || *lf.GPUMemory.BorrowingLimit != 12200 || lf.GPUMemory.LendingLimit != nil {
		t.Errorf("gpu-large-model quotas = %+v", lf)
	}
	if large.Preemption.BorrowWithinCohort != "LowerPriority" || large.Preemption.MaxPriorityThreshold != "batch" {
		t.Errorf("gpu-large-model preemption = %+v", large.Preemption)
	}
	if got := p.Queues["gpu-general"].Preemption.ReclaimWithinCohort; got != "LowerPriority" {
		t.Errorf("gpu-general reclaimWithinCohort = %q", got)
	}
	var ladder []string
	for _, pr := range p.Ladder() {
		ladder = append(ladder, pr.Name)
	}
	if want := []string{"always-on", "training", "on-demand-llm", "batch"}; !slices.Equal(ladder, want) {
		t.Errorf("ladder = %v, want %v", ladder, want)
	}
	if p.DefaultPriority() != "training" {
		t.Errorf("default priority = %q", p.DefaultPriority())
	}
	// No Argo lock: the cache lock removed after the series, the main lock
	// dropped for the faster hand-off (Kueue alone gates).
	if len(p.Locks) != 0 {
		t.Errorf("locks = %+v, want none", p.Locks)
	}
	order, cycle := p.LockOrder()
	if cycle != nil || len(order) != 0 {
		t.Errorf("lock order = %v (cycle %v), want none", order, cycle)
	}
	tpl := p.Templates["gpu-step"]
	if tpl.Priority != "training" || tpl.Request != (Request{Shares: 1, HostMemoryMiB: 2048, GPUMemoryMiB: 1024}) {
		t.Errorf("gpu-step = %+v", tpl)
	}
	if tpl.ModelCache == nil || !tpl.ModelCache.ReadOnly || tpl.CacheFree == nil || len(tpl.Locks) != 0 || len(tpl.CacheFree.Locks) != 0 {
		t.Errorf("gpu-step cache = %+v / %+v", tpl.ModelCache, tpl.CacheFree)
	}
	if p.DefaultGPUMemoryMiB != 1024 || p.DeclarationResource != "gpupolicy.dev/gpu-memory" {
		t.Errorf("defaults: %d MiB via %q", p.DefaultGPUMemoryMiB, p.DeclarationResource)
	}
	if got := p.Pos("templates", "gpu-step", "queue"); got != "../../policies/lab/templates.cue:5:13" {
		t.Errorf("Pos(templates.gpu-step.queue) = %q", got)
	}
	if plain, suffixed := p.UnitsMixed(); plain != nil || suffixed != nil {
		t.Errorf("lab mixes units: %v / %v", plain, suffixed)
	}
}

func TestParseMiB(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "2Gi": 2048, "512Mi": 512, "12Gi": 12288} {
		got, err := ParseMiB(in)
		if err != nil || got != want {
			t.Errorf("ParseMiB(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"2GB", "", "Gi", "1.5Gi"} {
		if _, err := ParseMiB(bad); err == nil {
			t.Errorf("ParseMiB(%q) succeeded", bad)
		}
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 404: "404", 1024: "1,024", 12200: "12,200", -16311: "-16,311", 1234567: "1,234,567"} {
		if got := Thousands(in); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", in, got, want)
		}
	}
}
