package policy

import (
	"slices"
	"testing"
)

// units-mixed names the same example and lists the same fields whatever
// order the forms were gathered in (they come from maps).
func TestUnitsMixedDeterministic(t *testing.T) {
	forms := []QuantityForm{
		{Path: []string{"services", "b", "gpuMemory"}},
		{Path: []string{"queues", "q", "flavors", "c", "gpuMemory", "nominalQuota"}},
		{Path: []string{"templates", "t", "gpuMemory"}, Suffixed: true},
		{Path: []string{"defaults", "gpuMemory"}},
		{Path: []string{"services", "a", "gpuMemory"}},
		{Path: []string{"templates", "s", "gpuMemory"}, Suffixed: true},
	}
	var want []string
	for i := range 24 {
		p := &Policy{GPUMemoryForms: slices.Clone(forms)}
		// A different order each time: rotate, and reverse every other.
		p.GPUMemoryForms = append(p.GPUMemoryForms[i%len(forms):], p.GPUMemoryForms[:i%len(forms)]...)
		if i%2 == 1 {
			slices.Reverse(p.GPUMemoryForms)
		}
		c := checker{p: p}
		c.units()
		var got []string
		for _, f := range c.ds {
			got = append(got, f.Rule+" "+f.Path+": "+f.Message)
		}
		if want == nil {
			want = got
			if len(want) != 2 || want[0] != `units-mixed templates.s.gpuMemory: templates.s.gpuMemory is written with the Mi suffix while 4 other GPU-memory quantities (e.g. defaults.gpuMemory) use the other form` {
				t.Fatalf("units-mixed: %q", want)
			}
			continue
		}
		if !slices.Equal(got, want) {
			t.Fatalf("order %d: %q, want %q", i, got, want)
		}
	}
}
