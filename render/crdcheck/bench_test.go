package crdcheck

import (
	"cmp"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// BenchmarkValidateRendered validates, as one `gpupolicy vet` or `render`
// does (ValidateOwned, each kind's memo empty at the start), every object
// with an embedded CRD in a rendered policy: CRDCHECK_BENCH_DIR, default
// out/bench/render-q1000 (the 1,000-queue policy hack/bench-policy.sh
// renders). All of them, then each of the kinds with the most, for
//
//	go test -run - -bench ValidateRendered -benchmem ./render/crdcheck/
//
// Skipped when the directory has no such object.
func BenchmarkValidateRendered(b *testing.B) {
	dir := cmp.Or(os.Getenv("CRDCHECK_BENCH_DIR"), filepath.Join("..", "..", "out", "bench", "render-q1000"))
	v := validator(b)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	byKind := map[string][][]byte{}
	for _, f := range files {
		y, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(y)
		if err != nil {
			b.Fatalf("%s: %v", f, err)
		}
		var u unstructured.Unstructured
		if err := utiljson.Unmarshal(j, &u.Object); err != nil {
			b.Fatalf("%s: %v", f, err)
		}
		if v.Has(u.GroupVersionKind()) {
			byKind["all"] = append(byKind["all"], j)
			byKind[u.GetKind()] = append(byKind[u.GetKind()], j)
		}
	}
	if len(byKind["all"]) == 0 {
		b.Skipf("no object with an embedded CRD in %s (hack/bench-policy.sh renders it)", dir)
	}
	for _, kind := range []string{"all", "ClusterQueue", "LocalQueue", "WorkflowTemplate", "ResourceFlavor"} {
		if docs := byKind[kind]; len(docs) > 0 {
			b.Run(kind, func(b *testing.B) { benchmarkValidate(b, v, docs) })
		}
	}
}

// benchmarkValidate validates the JSON objects docs with ValidateOwned,
// each iteration on fresh copies and with every memo emptied first (not
// timed); an object that fails is a failure.
func benchmarkValidate(b *testing.B, v *Validator, docs [][]byte) {
	decode := func() []*unstructured.Unstructured {
		objs := make([]*unstructured.Unstructured, len(docs))
		for i, j := range docs {
			objs[i] = &unstructured.Unstructured{}
			if err := utiljson.Unmarshal(j, &objs[i].Object); err != nil {
				b.Fatal(err)
			}
		}
		return objs
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		objs := decode()
		for _, cv := range v.byGVK {
			cv.memo.mu.Lock()
			cv.memo.by = nil
			cv.memo.mu.Unlock()
		}
		b.StartTimer()
		for _, o := range objs {
			if err := v.ValidateOwned(o); err != nil {
				b.Fatal(err)
			}
		}
	}
}
