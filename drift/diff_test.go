package drift

import (
	"strings"
	"testing"
)

// set builds a Set from YAML documents, one object each.
func set(t *testing.T, docs ...string) Set {
	t.Helper()
	files := map[string][]byte{}
	for i, d := range docs {
		files[string(rune('a'+i))+".yaml"] = []byte(d)
	}
	s, err := Parse(files)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func compare(t *testing.T, from, to Set) []Difference {
	t.Helper()
	ds := Compare(from, to)
	Explain(ds, from, to, GitSides)
	return ds
}

func clusterQueue(gpu, mem, decl string) string {
	return `apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpu-general}
spec:
  cohortName: gpu
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, memory, gpupolicy.dev/gpu-memory]
    flavors:
    - name: rtx-5060-ti
      resources:
      - {name: nvidia.com/gpu, nominalQuota: "` + gpu + `"}
      - {name: memory, nominalQuota: ` + mem + `}
      - {name: gpupolicy.dev/gpu-memory, nominalQuota: ` + decl + `}
`
}

func TestCompareIsSemantic(t *testing.T) {
	from := set(t, clusterQueue("8", "12Gi", "16311Mi"))
	// Same values in other forms, resources in another order, and an
	// empty map that the other side omits.
	to := set(t, `apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpu-general}
spec:
  cohortName: gpu
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, memory, gpupolicy.dev/gpu-memory]
    flavors:
    - name: rtx-5060-ti
      resources:
      - {name: gpupolicy.dev/gpu-memory, nominalQuota: 16311Mi}
      - {name: memory, nominalQuota: 12288Mi}
      - {name: nvidia.com/gpu, nominalQuota: 8}
status: {pendingWorkloads: 3}
`)
	if ds := Compare(from, to); len(ds) != 0 {
		t.Errorf("equal queues differ: %+v", ds)
	}
}

func TestClusterQueueQuota(t *testing.T) {
	ds := compare(t, set(t, clusterQueue("8", "12Gi", "16311Mi")), set(t, clusterQueue("6", "8Gi", "16311Mi")))
	if len(ds) != 2 {
		t.Fatalf("differences: %+v", ds)
	}
	want := map[string]string{
		"spec.resourceGroups[0].flavors[rtx-5060-ti].resources[nvidia.com/gpu].nominalQuota": "ClusterQueue gpu-general owns 8 shares on rtx-5060-ti at the pin, 6 shares at HEAD",
		"spec.resourceGroups[0].flavors[rtx-5060-ti].resources[memory].nominalQuota":         "owns 12,288 MiB of host memory on rtx-5060-ti at the pin, 8,192 MiB of host memory at HEAD",
	}
	for _, d := range ds {
		w, ok := want[d.Path]
		if !ok {
			t.Errorf("unexpected path %s", d.Path)
			continue
		}
		if !strings.Contains(d.Consequence, w) {
			t.Errorf("%s: %q lacks %q", d.Path, d.Consequence, w)
		}
	}
}

func priority(name, value string) string {
	return "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {name: " + name + "}\nvalue: " + value + "\n"
}

func TestPriorityOrder(t *testing.T) {
	from := set(t, priority("training", "100"), priority("on-demand-llm", "50"), priority("batch", "10"))
	ds := compare(t, from, set(t, priority("training", "100"), priority("on-demand-llm", "50"), priority("batch", "20")))
	if len(ds) != 1 || !strings.Contains(ds[0].Consequence, "order is unchanged (training > on-demand-llm > batch)") {
		t.Errorf("same order: %+v", ds)
	}
	ds = compare(t, from, set(t, priority("training", "100"), priority("on-demand-llm", "50"), priority("batch", "60")))
	if len(ds) != 1 || !strings.Contains(ds[0].Consequence, "reorders the ladder: training > on-demand-llm > batch at the pin, training > batch > on-demand-llm at HEAD") {
		t.Errorf("reorder: %+v", ds)
	}
}

func template(locks ...string) string {
	s := `apiVersion: argoproj.io/v1alpha1
kind: WorkflowTemplate
metadata: {name: gpu-step, namespace: experiments}
spec:
  templates:
  - name: gpu-step
    container: {name: main, image: job}
    synchronization:
      semaphores:
`
	for _, l := range locks {
		s += "      - configMapKeyRef: {name: gpu-semaphore, key: " + l + "}\n"
	}
	return s
}

func semaphores(kv string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gpu-semaphore, namespace: experiments}\ndata: {" + kv + "}\n"
}

func TestLocks(t *testing.T) {
	// The main lock goes from one to four.
	ds := compare(t, set(t, template("cache", "main"), semaphores(`main: "1", cache: "1"`)),
		set(t, template("cache", "main"), semaphores(`main: "4", cache: "1"`)))
	if len(ds) != 1 || ds[0].Path != "data.main" ||
		ds[0].Consequence != "Lock main holds 1 at the pin and 4 at HEAD: at the pin, the jobs run through gpu-step still run one at a time; at HEAD, up to 4 run at once, and below the lock the queue's quota decides admission." {
		t.Errorf("main 1 → 4: %+v", ds)
	}
	// HEAD's template takes a lock the pin's ConfigMap lacks, and the pin's
	// template did not take it.
	ds = compare(t, set(t, template("main"), semaphores(`main: "4"`)),
		set(t, template("cache", "main"), semaphores(`main: "4", cache: "1"`)))
	var cache *Difference
	for i := range ds {
		if ds[i].Path == "data.cache" {
			cache = &ds[i]
		}
	}
	if cache == nil || cache.Consequence != "Lock cache is new at HEAD (size 1)." {
		t.Errorf("new cache lock: %+v", ds)
	}
	// The cache lock removed, a template still taking it.
	ds = compare(t, set(t, template("cache", "main"), semaphores(`main: "4", cache: "1"`)),
		set(t, template("cache", "main"), semaphores(`main: "4"`)))
	if len(ds) != 1 || !strings.Contains(ds[0].Consequence, "HEAD removes lock cache, yet gpu-step still take it there") {
		t.Errorf("removed lock: %+v", ds)
	}
}

func TestObjectsOnOneSide(t *testing.T) {
	lq := "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: gpu-general, namespace: experiments}\nspec: {clusterQueue: gpu-general}\n"
	lr := "apiVersion: v1\nkind: LimitRange\nmetadata: {name: gpu-memory-default, namespace: experiments}\nspec:\n  limits:\n  - type: Container\n    default: {gpupolicy.dev/gpu-memory: 1Gi}\n"
	ds := compare(t, set(t, lq), set(t, lr))
	if len(ds) != 2 {
		t.Fatalf("%+v", ds)
	}
	for _, d := range ds {
		switch d.Change {
		case Added:
			if d.Kind != "LimitRange" || !strings.Contains(d.Consequence, "The pin has no LimitRange in experiments") {
				t.Errorf("added: %+v", d)
			}
		case Removed:
			if d.Kind != "LocalQueue" || !strings.Contains(d.Consequence, "HEAD no longer renders LocalQueue gpu-general") {
				t.Errorf("removed: %+v", d)
			}
		}
	}
	// The default changes.
	lr2 := strings.Replace(lr, "1Gi", "2Gi", 1)
	ds = compare(t, set(t, lr), set(t, lr2))
	if len(ds) != 1 || ds[0].Consequence != "A job in experiments that declares no GPU memory is counted at 1,024 MiB at the pin, 2,048 MiB at HEAD." {
		t.Errorf("default: %+v", ds)
	}
}

func TestDevicePluginReplicas(t *testing.T) {
	cm := func(n string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nvidia-device-plugin-config, namespace: nvidia-device-plugin}\ndata:\n  rtx-5060-ti: |\n    version: v1\n    sharing:\n      timeSlicing:\n        resources:\n        - name: nvidia.com/gpu\n          replicas: " + n + "\n"
	}
	ds := compare(t, set(t, cm("8")), set(t, cm("4")))
	if len(ds) != 1 || !strings.Contains(ds[0].Consequence, "time-slices the card into 8 shares at the pin, 4 shares at HEAD") {
		t.Errorf("%+v", ds)
	}
	if !strings.HasPrefix(ds[0].From, `{"sharing":`) {
		t.Errorf("a YAML value shows as compact JSON, got %q", ds[0].From)
	}
}

func TestFieldPaths(t *testing.T) {
	for k, want := range map[string]string{
		"spec":                     ".spec",
		"nvidia.com/gpu":           `["nvidia.com/gpu"]`,
		"gpupolicy.dev/gpu-memory": `["gpupolicy.dev/gpu-memory"]`,
		"":                         `[""]`,
	} {
		if got := field(k); got != want {
			t.Errorf("field(%q) = %s, want %s", k, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	_, err := Parse(map[string][]byte{"a.yaml": []byte("kind: ConfigMap\nmetadata: {name: x}\n"), "b.yaml": []byte("kind: ConfigMap\nmetadata: {name: x}\n")})
	if err == nil || !strings.Contains(err.Error(), "ConfigMap/x is also in a.yaml") {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := Parse(map[string][]byte{"a.yaml": []byte("foo: bar\n")}); err == nil {
		t.Error("an object without kind is accepted")
	}
	s, err := Parse(map[string][]byte{"kustomization.yaml": []byte("resources: [a.yaml]\n"), "a.yaml": []byte("# only a comment\n")})
	if err != nil || len(s) != 0 {
		t.Errorf("kustomization and empty documents: %v %v", s, err)
	}
}
