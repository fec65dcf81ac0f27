package e2e

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

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

var owner = map[string]string{contract.LabelManagedBy: contract.ManagedBy, contract.LabelEnvironment: "local"}

// localRender is environments/local rendered from the lab policy in the
// working tree, as reconcile would apply it at a pin.
func localRender(t *testing.T) (drift.Set, *policy.Policy) {
	t.Helper()
	p, err := policy.Load("../../policies/lab")
	if err != nil {
		t.Fatal(err)
	}
	env, err := environment.Load("../..", "local")
	if err != nil {
		t.Fatal(err)
	}
	return renderSet(t, env, p), p
}

func objects(set drift.Set, skip ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
next:
	for _, ref := range set.Refs() {
		for _, s := range skip {
			if ref == s {
				continue next
			}
		}
		out = append(out, &unstructured.Unstructured{Object: set[ref].Body})
	}
	return out
}

// TestReconcileAndLiveDrift walks the life of an environment on the real
// cluster: a dry run changes nothing; reconcile creates everything in
// order; a second run changes nothing; live drift is clean; a hand edit of
// a ClusterQueue shows as exactly that field, read by an identity that may
// only get, list and watch; reconcile puts it back; an object the pin no
// longer renders is pruned.
func TestReconcileAndLiveDrift(t *testing.T) {
	c := clustertest.Fresh(t) // asserts what a fresh cluster holds
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	set, _ := localRender(t)
	admin, err := kube.ForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := &reconcile.Reconciler{Client: admin.Dynamic, Mapper: admin.Mapper}
	desired := objects(set)

	t.Run("reconcile --dry-run at the pin shows the admission objects it would create", func(t *testing.T) {
		dryRunShowsAdmission(t, ctx, admin, r)
	})

	t.Run("dry run stores nothing", func(t *testing.T) {
		res, err := r.Apply(ctx, desired, reconcile.Options{Owner: owner, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Count(reconcile.Created); got != len(desired) {
			t.Errorf("dry run would create %d of %d objects", got, len(desired))
		}
		if _, err := admin.Dynamic.Resource(contract.GVRClusterQueue).Get(ctx, "gpu-general", metav1.GetOptions{}); err == nil {
			t.Error("the dry run stored ClusterQueue gpu-general")
		}
	})

	t.Run("first run creates everything, second changes nothing", func(t *testing.T) {
		res, err := r.Apply(ctx, desired, reconcile.Options{Owner: owner})
		if err != nil {
			t.Fatalf("%v\n%+v", err, res.Changes)
		}
		// Namespaces that already exist (none here) would be "configured";
		// everything else is new.
		if got := res.Count(reconcile.Created); got != len(desired) {
			t.Errorf("created %d of %d: %+v", got, len(desired), res.Changes)
		}
		if res.Changes[0].Kind != "Namespace" {
			t.Errorf("first applied %s, want a Namespace", res.Changes[0].Kind)
		}
		again, err := r.Apply(ctx, desired, reconcile.Options{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		if again.Changed() || again.Count(reconcile.Unchanged) != len(desired) {
			t.Errorf("second run changed something: %+v", again.Changes)
		}
	})

	reader, err := c.ReadOnlyUser(ctx, "drift-reader")
	if err != nil {
		t.Fatal(err)
	}
	ro, err := kube.New(reader.Kubeconfig, "")
	if err != nil {
		t.Fatal(err)
	}
	liveDiff := func(t *testing.T) []drift.Difference {
		t.Helper()
		side := &live.Side{Client: ro.Dynamic, Mapper: ro.Mapper, Pinned: set, Owner: owner, Name: "the cluster"}
		live, err := side.Objects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ds := drift.Compare(set, live)
		drift.Explain(ds, set, live, drift.Sides{From: "the pin", To: "the cluster"})
		return ds
	}

	t.Run("live drift is clean after reconcile (no defaulted-field noise)", func(t *testing.T) {
		if ds := liveDiff(t); len(ds) != 0 {
			t.Fatalf("live drift right after reconcile: %+v", ds)
		}
	})

	t.Run("a hand edit of a ClusterQueue is reported as exactly that field", func(t *testing.T) {
		patch := `[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota","value":4}]`
		if _, err := admin.Dynamic.Resource(contract.GVRClusterQueue).Patch(ctx, "gpu-general", types.JSONPatchType, []byte(patch),
			metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
		ds := liveDiff(t)
		if len(ds) != 1 {
			t.Fatalf("got %d differences, want 1: %+v", len(ds), ds)
		}
		d := ds[0]
		if d.Object() != "ClusterQueue/gpu-general" || d.Path != `spec.resourceGroups[0].flavors[rtx-5060-ti].resources[nvidia.com/gpu].nominalQuota` ||
			d.From != "8" || d.To != "4" {
			t.Errorf("got %s %s: %s → %s", d.Object(), d.Path, d.From, d.To)
		}
		if d.Consequence == "" {
			t.Error("no consequence for a quota change")
		}
		// Drift only read: the read-only identity could not have written.
		if _, err := ro.Dynamic.Resource(contract.GVRClusterQueue).Patch(ctx, "gpu-general", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
			t.Error("the read-only identity could patch a ClusterQueue")
		}
	})

	t.Run("reconcile puts the field back", func(t *testing.T) {
		res, err := r.Apply(ctx, desired, reconcile.Options{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		if res.Count(reconcile.Configured) != 1 {
			t.Errorf("want 1 configured: %+v", res.Changes)
		}
		if ds := liveDiff(t); len(ds) != 0 {
			t.Errorf("drift after reconcile: %+v", ds)
		}
	})

	t.Run("an object the pin no longer renders is pruned", func(t *testing.T) {
		res, err := r.Apply(ctx, objects(set, "WorkloadPriorityClass/batch"), reconcile.Options{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		var pruned []string
		for _, ch := range res.Changes {
			if ch.Action == reconcile.Pruned {
				pruned = append(pruned, ch.Kind+"/"+ch.Name)
			}
		}
		if len(pruned) != 1 || pruned[0] != "WorkloadPriorityClass/batch" {
			t.Errorf("pruned %v, want [WorkloadPriorityClass/batch]", pruned)
		}
		// Back to the pin for the tests after this one.
		if _, err := r.Apply(ctx, desired, reconcile.Options{Owner: owner}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a reader that may not list a kind the pin lacks gets the rest, and is told", func(t *testing.T) {
		// Least privilege for drift --live: list only the kinds the lab
		// renders (it declares no Cohort) and the local environment adds (the
		// model store's PersistentVolume and claims).
		rules := []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps", "limitranges", "persistentvolumeclaims", "persistentvolumes"}, Verbs: cluster.ReadOnlyVerbs},
			{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"resourceflavors", "clusterqueues", "localqueues", "workloadpriorityclasses"}, Verbs: cluster.ReadOnlyVerbs},
			{APIGroups: []string{"argoproj.io"}, Resources: []string{"workflowtemplates"}, Verbs: cluster.ReadOnlyVerbs},
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, Verbs: cluster.ReadOnlyVerbs},
		}
		narrow, err := c.User(ctx, "drift-reader-narrow", rules...)
		if err != nil {
			t.Fatal(err)
		}
		nc, err := kube.New(narrow.Kubeconfig, "")
		if err != nil {
			t.Fatal(err)
		}
		side := &live.Side{Client: nc.Dynamic, Mapper: nc.Mapper, Pinned: set, Owner: owner, Name: "the cluster", Kinds: contract.RenderedKinds}
		got, err := side.Objects(ctx)
		if err != nil {
			t.Fatalf("a reader of the rendered kinds only: %v", err)
		}
		if ds := drift.Compare(set, got); len(ds) != 0 {
			t.Errorf("drift read by the narrow reader: %+v", ds)
		}
		if !slices.Equal(side.Unlisted, []string{"Cohort"}) {
			t.Errorf("unlisted %v, want [Cohort]", side.Unlisted)
		}
	})

	t.Run("a kind the pin no longer renders at all is reported, then pruned", func(t *testing.T) {
		// A policy that drops its last LimitRange (or Cohort): the kind is
		// in contract.RenderedKinds, not in the render.
		without := drift.Set{}
		var limitRanges []string
		for ref, o := range set {
			if o.Kind == "LimitRange" {
				limitRanges = append(limitRanges, ref)
				continue
			}
			without[ref] = o
		}
		slices.Sort(limitRanges)
		if len(limitRanges) == 0 {
			t.Fatal("the lab renders no LimitRange")
		}
		extra := func(kinds []schema.GroupVersionKind) []string {
			side := &live.Side{Client: ro.Dynamic, Mapper: ro.Mapper, Pinned: without, Owner: owner, Name: "the cluster", Kinds: kinds}
			got, err := side.Objects(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, d := range drift.Compare(without, got) {
				if d.Change == drift.Added {
					out = append(out, drift.Ref(d.Kind, d.Namespace, d.Name))
				} else {
					t.Errorf("unexpected difference %s %s", d.Change, d.Object())
				}
			}
			slices.Sort(out)
			return out
		}
		if got := extra(nil); len(got) != 0 {
			t.Errorf("without the rendered kinds, live drift reads kinds the pin lacks: %v", got)
		}
		if got := extra(contract.RenderedKinds); !slices.Equal(got, limitRanges) {
			t.Errorf("live drift reports %v as extra, want the LimitRanges %v", got, limitRanges)
		}
		res, err := r.Apply(ctx, objects(set, limitRanges...), reconcile.Options{Owner: owner, Kinds: contract.RenderedKinds})
		if err != nil {
			t.Fatal(err)
		}
		var pruned []string
		for _, ch := range res.Changes {
			if ch.Action == reconcile.Pruned {
				pruned = append(pruned, drift.Ref(ch.Kind, ch.Namespace, ch.Name))
			}
		}
		slices.Sort(pruned)
		if !slices.Equal(pruned, limitRanges) {
			t.Errorf("pruned %v, want the LimitRanges %v", pruned, limitRanges)
		}
		if _, err := r.Apply(ctx, desired, reconcile.Options{Owner: owner, Kinds: contract.RenderedKinds}); err != nil {
			t.Fatal(err)
		}
		if ds := liveDiff(t); len(ds) != 0 {
			t.Errorf("drift after restoring the pin: %+v", ds)
		}
	})
}

// dryRunShowsAdmission runs what gpupolicy reconcile --env local --dry-run
// runs on a cluster that has none of the render yet (the render at the pin,
// read from git objects; the API server's dry run; the lines it prints as
// it goes) and checks that it shows, for every namespace where the pinned
// policy's GPU workloads run, the ValidatingAdmissionPolicy and binding it
// would create, and that it stored neither.
func dryRunShowsAdmission(t *testing.T, ctx context.Context, admin *kube.Clients, r *reconcile.Reconciler) {
	t.Helper()
	ws, err := environment.Open("../..", "local", true)
	if err != nil {
		t.Fatal(err)
	}
	pinned, side, err := ws.Pinned(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := environment.PolicyAt(ws.Repo, side.Commit.Hash, ws.Env.Policy)
	if err != nil {
		t.Fatal(err)
	}
	var printed []string
	res, err := r.Apply(ctx, objects(pinned), reconcile.Options{Owner: owner, DryRun: true,
		// As the command prints its progress.
		Progress: func(ch reconcile.Change) {
			if ch.Action != reconcile.Unchanged && ch.Action != reconcile.NotApplied {
				printed = append(printed, ch.String())
			}
		}})
	if err != nil {
		t.Fatalf("%v\n%+v", err, res.Changes)
	}
	if len(p.GPUNamespaces()) == 0 {
		t.Fatal("the pinned policy has no GPU namespace")
	}
	for _, ns := range p.GPUNamespaces() {
		for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			want := kind + "/" + contract.AdmissionPolicyPrefix + ns + " " + string(reconcile.Created)
			if !slices.ContainsFunc(printed, func(l string) bool { return l == want || strings.HasPrefix(l, want+" (") }) {
				t.Errorf("the dry run does not show %q; it printed:\n%s", want, strings.Join(printed, "\n"))
			}
		}
		for _, gvr := range []schema.GroupVersionResource{contract.GVRValidatingAdmissionPolicy, contract.GVRValidatingAdmissionPolicyBinding} {
			if _, err := admin.Dynamic.Resource(gvr).Get(ctx, contract.AdmissionPolicyPrefix+ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the dry run stored %s %s%s (get: %v)", gvr.Resource, contract.AdmissionPolicyPrefix, ns, err)
			}
		}
	}
}

// TestReconcileStopsMidwayAndRerunCompletes: an object the API server
// rejects stops the run; the report says what was applied, what failed and
// what was not reached; once fixed, a rerun completes it.
func TestReconcileStopsMidwayAndRerunCompletes(t *testing.T) {
	c := clustertest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, err := kube.ForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := &reconcile.Reconciler{Client: admin.Dynamic, Mapper: admin.Mapper}
	labels := map[string]any{contract.LabelManagedBy: contract.ManagedBy, contract.LabelEnvironment: "midway"}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "midway", "labels": labels}}}
	// Kueue's CEL rule: borrowingLimit must be nil when cohort is empty.
	bad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
		"metadata": map[string]any{"name": "midway-cq", "labels": labels},
		"spec": map[string]any{"namespaceSelector": map[string]any{}, "resourceGroups": []any{map[string]any{
			"coveredResources": []any{"nvidia.com/gpu"},
			"flavors": []any{map[string]any{"name": "rtx-5060-ti", "resources": []any{
				map[string]any{"name": "nvidia.com/gpu", "nominalQuota": int64(1), "borrowingLimit": int64(1)}}}}}}}}}
	lq := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": "midway", "namespace": "midway", "labels": labels},
		"spec":     map[string]any{"clusterQueue": "midway-cq"}}}
	own := map[string]string{contract.LabelManagedBy: contract.ManagedBy, contract.LabelEnvironment: "midway"}

	res, err := r.Apply(ctx, []*unstructured.Unstructured{lq, bad, ns}, reconcile.Options{Owner: own})
	if err == nil || !strings.Contains(err.Error(), "borrowingLimit must be nil when cohort is empty") {
		t.Fatalf("want the CEL rejection, got %v", err)
	}
	got := map[string]reconcile.Action{}
	for _, ch := range res.Changes {
		got[ch.Kind] = ch.Action
	}
	if got["Namespace"] != reconcile.Created || got["ClusterQueue"] != reconcile.Failed || got["LocalQueue"] != reconcile.NotApplied {
		t.Fatalf("outcomes %v", got)
	}
	// Fix the queue (give it a cohort) and run again: it completes.
	bad.Object["spec"].(map[string]any)["cohortName"] = "midway"
	res, err = r.Apply(ctx, []*unstructured.Unstructured{lq, bad, ns}, reconcile.Options{Owner: own})
	if err != nil {
		t.Fatal(err)
	}
	if res.Count(reconcile.Unchanged) != 1 || res.Count(reconcile.Created) != 2 {
		t.Errorf("rerun: %+v", res.Changes)
	}
	// Clean up what this test made.
	if _, err := r.Apply(ctx, []*unstructured.Unstructured{ns}, reconcile.Options{Owner: own}); err != nil {
		t.Fatal(err)
	}
	_ = c.Clientset().CoreV1().Namespaces().Delete(ctx, "midway", metav1.DeleteOptions{})
}

// TestWorkloadCountedAtDefault: a job whose pod declares no GPU memory is
// counted by Kueue at the LimitRange default, and the Workloads check says
// so; a job that declares 12,452 MiB is counted as that.
func TestWorkloadCountedAtDefault(t *testing.T) {
	c := clustertest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	set, p := localRender(t)
	admin, err := kube.ForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := &reconcile.Reconciler{Client: admin.Dynamic, Mapper: admin.Mapper}
	if _, err := r.Apply(ctx, objects(set), reconcile.Options{Owner: owner}); err != nil {
		t.Fatal(err)
	}
	job := func(name string, declare string) *batchv1.Job {
		req := corev1.ResourceList{
			"nvidia.com/gpu": resource.MustParse("1"),
			"memory":         resource.MustParse("2Gi"),
		}
		if declare != "" {
			req[corev1.ResourceName(p.DeclarationResource)] = resource.MustParse(declare)
		}
		one := int32(1)
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "experiments",
				Labels: map[string]string{contract.LabelKueueQueue: "gpu-general", contract.LabelKueuePriority: "batch"}},
			Spec: batchv1.JobSpec{
				Parallelism: &one, Completions: &one, Suspend: ptrTo(true),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{cluster.AnnotationRunSeconds: "60"}},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{Name: "main", Image: "registry.lab.internal/gpu-job:2026.11",
							Resources: corev1.ResourceRequirements{Requests: req, Limits: req}}},
					},
				},
			},
		}
	}
	for _, j := range []*batchv1.Job{job("undeclared", ""), job("eval-12452", "12452Mi")} {
		if _, err := c.Clientset().BatchV1().Jobs("experiments").Create(ctx, j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		bg := metav1.DeletePropagationBackground
		for _, n := range []string{"undeclared", "eval-12452"} {
			_ = c.Clientset().BatchV1().Jobs("experiments").Delete(context.Background(), n, metav1.DeleteOptions{PropagationPolicy: &bg})
		}
	}()
	ro, err := c.ReadOnlyUser(ctx, "workload-reader")
	if err != nil {
		t.Fatal(err)
	}
	roc, err := kube.New(ro.Kubeconfig, "")
	if err != nil {
		t.Fatal(err)
	}
	var counts []live.WorkloadCount
	deadline := time.Now().Add(90 * time.Second)
	for {
		counts, err = live.Workloads(ctx, roc.Dynamic, p.DeclarationResource, p.DefaultGPUMemoryMiB)
		if err != nil {
			t.Fatal(err)
		}
		admitted := 0
		for _, w := range counts {
			if w.Admitted {
				admitted++
			}
		}
		if admitted == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	byOwner := map[string]live.WorkloadCount{}
	for _, w := range counts {
		byOwner[w.Owner] = w
	}
	u, ok := byOwner["Job/undeclared"]
	if !ok || !u.Admitted || !u.AtDefault || u.CountedMiB != 1024 {
		t.Fatalf("undeclared job: %+v (all: %+v)", u, counts)
	}
	if !strings.Contains(u.Message, "declares no GPU memory") || !strings.Contains(u.Message, "1,024 MiB LimitRange default") {
		t.Errorf("message %q", u.Message)
	}
	e := byOwner["Job/eval-12452"]
	if !e.Admitted || e.AtDefault || e.CountedMiB != 12452 {
		t.Errorf("declared job: %+v", e)
	}
}

func ptrTo[T any](v T) *T { return &v }
