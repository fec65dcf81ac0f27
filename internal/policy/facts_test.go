package policy

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Memory quantities: MiB to Kubernetes and back, and a plain integer in a
// manifest is bytes, never MiB.
func TestQuantities(t *testing.T) {
	for mib, want := range map[int64]string{1024: "1Gi", 12200: "12200Mi", 404: "404Mi", 0: "0", 12288: "12Gi"} {
		q := MiBQuantity(mib)
		if q.String() != want {
			t.Errorf("MiBQuantity(%d) = %s, want %s", mib, q.String(), want)
		}
		if got, whole := QuantityMiB(q); got != mib || !whole {
			t.Errorf("QuantityMiB(%s) = %d, %v", want, got, whole)
		}
	}
	if s := MiBString(12452); s != "12452Mi" {
		t.Errorf("MiBString = %s", s)
	}
	if got, whole := QuantityMiB(resource.MustParse("1024")); got != 0 || whole {
		t.Errorf("a plain 1024 is %d MiB (whole %v); Kubernetes reads it as 1,024 bytes", got, whole)
	}
	for in, want := range map[any]string{"1024Mi": "1,024 MiB", "1Gi": "1,024 MiB", "1024": "1,024 bytes", int64(1024): "1,024 bytes", "12452Mi": "12,452 MiB", "bogus": "bogus"} {
		if got := DescribeMemory(in); got != want {
			t.Errorf("DescribeMemory(%v) = %q, want %q", in, got, want)
		}
	}
	for k, want := range map[Kind]string{Shares: "4", HostMemory: "4Mi", GPUMemory: "4Mi"} {
		if got := k.QuantityString(4); got != want {
			t.Errorf("%s.QuantityString(4) = %s, want %s", k, got, want)
		}
	}
	// The policy's GPU memory: a plain integer is MiB there, and only there.
	var g gpuMem
	if err := g.UnmarshalJSON([]byte(`1024`)); err != nil || g.MiB != 1024 || g.Suffixed {
		t.Errorf("policy gpuMemory 1024 = %+v, %v", g, err)
	}
	if err := g.UnmarshalJSON([]byte(`"1024Mi"`)); err != nil || g.MiB != 1024 || !g.Suffixed {
		t.Errorf("policy gpuMemory \"1024Mi\" = %+v, %v", g, err)
	}
	if err := g.UnmarshalJSON([]byte(`"1Gi"`)); err == nil {
		t.Error("policy gpuMemory \"1Gi\" accepted; the schema allows Mi only")
	}
}

// The shares resource is decided in one place: Resource(Shares) is what
// the node advertises, renamed or not.
func TestSharesResource(t *testing.T) {
	p := &Policy{DeclarationResource: "gpupolicy.dev/gpu-memory"}
	if p.Resource(Shares) != "nvidia.com/gpu" || p.SharesResource() != "nvidia.com/gpu" {
		t.Errorf("without renameByDefault: %s, %s", p.Resource(Shares), p.SharesResource())
	}
	p.DevicePlugin.RenameByDefault = true
	if p.Resource(Shares) != "nvidia.com/gpu.shared" || p.SharesResource() != p.Resource(Shares) {
		t.Errorf("with renameByDefault: Resource(Shares) %s, SharesResource %s", p.Resource(Shares), p.SharesResource())
	}
	for _, r := range []string{"nvidia.com/gpu", "nvidia.com/gpu.shared"} {
		if !IsSharesResource(r) {
			t.Errorf("IsSharesResource(%s) false", r)
		}
	}
	if IsSharesResource("memory") || IsSharesResource(p.DeclarationResource) {
		t.Error("IsSharesResource of memory or the declaration")
	}
}

func TestVariantsAndSmallestLock(t *testing.T) {
	p := &Policy{
		Locks: map[string]Lock{"cache": {Name: "cache", Size: 1}, "main": {Name: "main", Size: 4}},
		Templates: map[string]Template{
			"gpu-step": {Name: "gpu-step", Locks: []string{"cache", "main"}, ModelCache: &ModelCache{Claim: "hf-cache"},
				CacheFree: &CacheFree{Name: "gpu-step-no-cache", Locks: []string{"main"}}},
			"plain": {Name: "plain"},
		},
	}
	vs := p.Variants()
	if len(vs) != 3 || vs[0].Name != "gpu-step" || vs[1].Name != "gpu-step-no-cache" || vs[2].Name != "plain" {
		t.Fatalf("variants %+v", vs)
	}
	if vs[0].CacheFree || vs[0].ModelCache == nil || !vs[1].CacheFree || vs[1].ModelCache != nil || vs[1].Template.Name != "gpu-step" {
		t.Errorf("variants %+v", vs)
	}
	for name, want := range map[string]string{"gpu-step": "cache", "gpu-step-no-cache": "main", "plain": ""} {
		v, ok := p.Variant(name)
		if !ok {
			t.Fatalf("no variant %s", name)
		}
		l, ok := p.SmallestLock(v.Locks)
		if l.Name != want || ok != (want != "") {
			t.Errorf("SmallestLock(%s) = %s, %v; want %q", name, l.Name, ok, want)
		}
	}
	if _, ok := p.Variant("nope"); ok {
		t.Error("Variant(nope) found")
	}
}

func TestStateLabel(t *testing.T) {
	for want, st := range map[string]map[string]string{
		"no on-demand services":       nil,
		"qwen2-5-7b up":               {"qwen2-5-7b": ServiceUp},
		"qwen2-5-7b down":             {"qwen2-5-7b": ServiceDown},
		"a up, b down":                {"b": ServiceDown, "a": ServiceUp},
		"all on-demand services down": {"b": ServiceDown, "a": ServiceDown},
	} {
		if got := StateLabel(st); got != want {
			t.Errorf("StateLabel(%v) = %q, want %q", st, got, want)
		}
	}
}
