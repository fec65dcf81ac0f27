package drift

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// labSet parses the committed lab render (deploy/lab).
func labSet(tb testing.TB) Set {
	tb.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir("../deploy/lab", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		files[path] = b
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := Parse(files)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// withExtra returns a copy of s holding n more owned ConfigMaps, as a live
// cluster does that gpupolicy's owner labels select but the render lacks.
func withExtra(s Set, n int) Set {
	out := Set{}
	for r, o := range s {
		out[r] = o
	}
	for i := range n {
		o := &Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: fmt.Sprintf("ns-%d", i%50), Name: fmt.Sprintf("extra-%05d", i),
			Body: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": fmt.Sprintf("extra-%05d", i), "labels": map[string]any{"app.kubernetes.io/managed-by": "gpupolicy"}},
				"data":     map[string]any{"k": "v"}}}
		out[o.Ref()] = o
	}
	return out
}

// BenchmarkCompareExplain is the live side's comparison of the pinned lab
// render with a cluster holding n extra owned objects. ns/op must grow
// linearly in n (10× from 1,000 to 10,000): it grew quadratically while
// every ConfigMap difference walked the render's templates and sorted the
// whole set (issue 10).
func BenchmarkCompareExplain(b *testing.B) {
	pinned := labSet(b)
	for _, n := range []int{1000, 10000} {
		live := withExtra(pinned, n)
		b.Run(fmt.Sprintf("extra=%d", n), func(b *testing.B) {
			for b.Loop() {
				ds := Compare(pinned, live)
				Explain(ds, pinned, live, Sides{From: "the pin", To: "the cluster"})
				if len(ds) != n {
					b.Fatalf("%d differences, want %d", len(ds), n)
				}
			}
		})
	}
}

// The extra objects are each one Added difference, explained.
func TestCompareExtraObjects(t *testing.T) {
	pinned := labSet(t)
	live := withExtra(pinned, 3)
	ds := Compare(pinned, live)
	Explain(ds, pinned, live, Sides{From: "the pin", To: "the cluster"})
	if len(ds) != 3 {
		t.Fatalf("%d differences, want 3: %+v", len(ds), ds)
	}
	for i, d := range ds {
		if d.Change != Added || d.Kind != "ConfigMap" || d.Name != fmt.Sprintf("extra-%05d", i) {
			t.Errorf("difference %d = %+v, want ConfigMap extra-%05d added", i, d, i)
		}
	}
}
