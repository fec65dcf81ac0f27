// Package scale measures and checks the live side of drift on a cluster
// that holds many objects: the real local cluster (package cluster) with
// thousands of owned ConfigMaps and Kueue Workloads.
//
// The test runs with the others (make test). The benchmark does not; run it
// with
//
//	go test -run '^$' -bench LiveDrift -benchtime 1x ./test/scale/
//
// It reports, per size, the wall time of the list calls (list-s), the CPU
// the reading and comparison took in this process (cpu-s), the time waited
// on the cluster (wait-s: wall minus CPU) and the comparison and
// explanation alone (compare-s).
package scale

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/drift/live"
	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/internal/kube/reconcile"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
)

func TestMain(m *testing.M) { os.Exit(clustertest.Main(m)) }

var owner = map[string]string{contract.LabelManagedBy: contract.ManagedBy, contract.LabelEnvironment: clustertest.Env}

// extraNamespace holds the objects the render lacks.
const extraNamespace = "scale-extra"

// deployLocal reconciles the local environment's render of policies/lab as
// reconcile --env local would, and returns the render and the policy.
func deployLocal(tb testing.TB, ctx context.Context, c *cluster.Cluster) (drift.Set, *policy.Policy, *kube.Clients) {
	tb.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	p, err := clustertest.LabPolicy()
	if err != nil {
		tb.Fatal(err)
	}
	env, err := environment.Load(root, clustertest.Env)
	if err != nil {
		tb.Fatal(err)
	}
	files, err := env.Render(p)
	if err != nil {
		tb.Fatal(err)
	}
	set, err := drift.Parse(files)
	if err != nil {
		tb.Fatal(err)
	}
	admin, err := kube.ForConfig(c.RESTConfig())
	if err != nil {
		tb.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, ref := range set.Refs() {
		objs = append(objs, &unstructured.Unstructured{Object: set[ref].Body})
	}
	rec := &reconcile.Reconciler{Client: admin.Dynamic, Mapper: admin.Mapper}
	if res, err := rec.Apply(ctx, objs, reconcile.Options{Owner: owner}); err != nil {
		tb.Fatalf("reconcile: %v\n%+v", err, res)
	}
	if err := c.CreateNamespace(ctx, extraNamespace); err != nil {
		tb.Fatal(err)
	}
	return set, p, admin
}

// createExtra creates n owned ConfigMaps and m Workloads named from first on
// in extraNamespace, eight at a time. The Workloads name a LocalQueue that
// does not exist, so Kueue leaves them inadmissible and idle.
func createExtra(ctx context.Context, client dynamic.Interface, first, n, m int) error {
	jobs := make(chan *unstructured.Unstructured)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range jobs {
				gvr := contract.GVRWorkload
				if o.GetKind() == "ConfigMap" {
					gvr = cmGVR
				}
				if _, err := client.Resource(gvr).Namespace(extraNamespace).Create(ctx, o, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err):
					default:
					}
				}
			}
		}()
	}
	for i := first; i < first+n; i++ {
		jobs <- &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("extra-%05d", i), "labels": toAny(owner)},
			"data":     map[string]any{"k": "v"}}}
	}
	for i := first; i < first+m; i++ {
		jobs <- &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
			"metadata": map[string]any{"name": fmt.Sprintf("wl-%05d", i)},
			"spec": map[string]any{"queueName": "no-such-queue", "podSets": []any{map[string]any{
				"name": "main", "count": int64(1),
				"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{
					"name": "step", "image": "busybox",
					"resources": map[string]any{"requests": map[string]any{"cpu": "100m"}}}}}}}}}}}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

var cmGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestLiveDriftPagesAndFallsBack: the live side reads by kind in pages of
// 500, so 620 extra owned ConfigMaps (two pages) are each one Added
// difference, and a pinned object whose owner labels were removed by hand —
// absent from the owner-selected list — is still read (by a get) and
// compared: its labels are the one Changed difference. 520 Workloads (two
// pages) are each checked.
func TestLiveDriftPagesAndFallsBack(t *testing.T) {
	c := clustertest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	set, p, admin := deployLocal(t, ctx, c)
	bulk := bulkClient(t, c)
	if err := createExtra(ctx, bulk, 0, 620, 520); err != nil {
		t.Fatal(err)
	}
	// A LocalQueue the render holds, its owner labels removed by hand.
	lq := set.OfKind("LocalQueue")[0]
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, contract.LabelManagedBy)
	if _, err := admin.Dynamic.Resource(contract.GVRLocalQueue).Namespace(lq.Namespace).Patch(ctx, lq.Name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	side := &live.Side{Client: admin.Dynamic, Mapper: admin.Mapper, Pinned: set, Owner: owner, Name: "the cluster", Where: "local"}
	rep, err := live.Check(ctx, side, &drift.Report{Environment: clustertest.Env}, p)
	if err != nil {
		t.Fatal(err)
	}
	added, lqChanged := 0, false
	for _, d := range rep.Live.Differences {
		switch {
		case d.Change == drift.Added && d.Kind == "ConfigMap" && d.Namespace == extraNamespace:
			added++
		case d.Kind == "LocalQueue" && d.Name == lq.Name && d.Change == drift.Changed:
			lqChanged = true
		default:
			t.Errorf("unexpected difference %+v", d)
		}
	}
	if added != 620 {
		t.Errorf("%d extra ConfigMaps reported, want 620 (two pages of the owner-selected list)", added)
	}
	if !lqChanged {
		t.Errorf("the LocalQueue %s/%s with its owner label removed was not compared (want its labels as a difference)", lq.Namespace, lq.Name)
	}
	wls := 0
	for _, w := range rep.Live.Workloads {
		if w.Namespace == extraNamespace {
			wls++
		}
	}
	if wls != 520 {
		t.Errorf("%d Workloads checked in %s, want 520", wls, extraNamespace)
	}
}

// bulkClient is an admin client without a client-side rate limit, for
// creating the test's objects.
func bulkClient(tb testing.TB, c *cluster.Cluster) dynamic.Interface {
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// cpu is this process's user + system CPU time.
func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLiveDrift reads and compares the cluster as drift --live does,
// idle (the render alone) and with 2,500 and 10,000 extra objects, half
// owned ConfigMaps, half Workloads (issue 10's sizes). Targets: the
// comparison grows linearly and adds under 3 s to the list calls at
// 10,000; idle, well under a second waiting.
func BenchmarkLiveDrift(b *testing.B) {
	c := clustertest.Shared(b)
	ctx := context.Background()
	set, p, _ := deployLocal(b, ctx, c)
	bulk := bulkClient(b, c)
	// A client as the verb builds it (kube.ForConfig: its rate limit).
	verb, err := kube.ForConfig(c.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	have := 0
	for _, total := range []int{0, 2500, 10000} {
		if total > have {
			if err := createExtra(ctx, bulk, have/2, (total-have)/2, (total-have)/2); err != nil {
				b.Fatal(err)
			}
			have = total
		}
		b.Run(fmt.Sprintf("extra=%d", total), func(b *testing.B) {
			var list, compare, cpuUsed, wall time.Duration
			for b.Loop() {
				side := &live.Side{Client: verb.Dynamic, Mapper: verb.Mapper, Pinned: set, Owner: owner, Name: "the cluster", Where: "local"}
				c0, t0 := cpu(), time.Now()
				liveSet, err := side.Objects(ctx)
				if err != nil {
					b.Fatal(err)
				}
				wls, err := live.Workloads(ctx, verb.Dynamic, p.DeclarationResource, p.DefaultGPUMemoryMiB)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				ds := drift.Compare(set, liveSet)
				drift.Explain(ds, set, liveSet, live.Sides)
				t2 := time.Now()
				list += t1.Sub(t0)
				compare += t2.Sub(t1)
				wall += t2.Sub(t0)
				cpuUsed += cpu() - c0
				if len(ds) != total/2 || len(wls) < total/2 {
					b.Fatalf("%d differences and %d Workloads, want %d and at least %d", len(ds), len(wls), total/2, total/2)
				}
			}
			n := float64(b.N)
			b.ReportMetric(list.Seconds()/n, "list-s")
			b.ReportMetric(compare.Seconds()/n, "compare-s")
			b.ReportMetric(cpuUsed.Seconds()/n, "cpu-s")
			b.ReportMetric((wall-cpuUsed).Seconds()/n, "wait-s")
		})
	}
}
