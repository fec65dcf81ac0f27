package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current render")

// labDir is the lab policy; GPUPOLICY_TEST_LAB points the tests at another
// copy (e.g. one with a fix not yet in policies/lab).
func labDir() string {
	if d := os.Getenv("GPUPOLICY_TEST_LAB"); d != "" {
		return d
	}
	return filepath.Join("..", "policies", "lab")
}

func loadLab(t testing.TB) *policy.Policy {
	t.Helper()
	p, err := policy.Load(labDir())
	if err != nil {
		t.Fatalf("loading the lab policy: %v", err)
	}
	return p
}

func renderLab(t testing.TB) *Result {
	t.Helper()
	r, err := Render(loadLab(t))
	if err != nil {
		t.Fatalf("the lab policy does not render:\n%v", err)
	}
	return r
}

// find returns the typed object of a kind and name (namespace "" for
// cluster-scoped), failing the test when it is missing.
func find[T any](t *testing.T, r *Result, kind, namespace, name string) T {
	t.Helper()
	for _, o := range r.Objects {
		if o.Kind == kind && o.Namespace == namespace && o.Name == name {
			v, ok := o.Obj.(T)
			if !ok {
				t.Fatalf("%s %s/%s is a %T", kind, namespace, name, o.Obj)
			}
			return v
		}
	}
	t.Fatalf("render has no %s %s/%s", kind, namespace, name)
	var zero T
	return zero
}

func TestGoldenLab(t *testing.T) {
	r := renderLab(t)
	dir := filepath.Join("testdata", "golden", "lab")
	if *update {
		if _, err := Write(dir, r.Files); err != nil {
			t.Fatal(err)
		}
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%v (run go test ./render/ -run TestGoldenLab -update)", err)
	}
	golden := map[string]bool{}
	for _, e := range entries {
		golden[e.Name()] = true
		if _, ok := r.Files[e.Name()]; !ok {
			t.Errorf("golden %s is no longer rendered", e.Name())
		}
	}
	for _, name := range r.FileNames() {
		if !golden[name] {
			t.Errorf("%s is rendered but has no golden file", name)
			continue
		}
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Files[name], want) {
			t.Errorf("%s differs from its golden file (rerun with -update and review the diff):\n%s", name, r.Files[name])
		}
	}
}

// TestLabValues checks the lab's numbers in the typed objects, independent
// of the golden files.
func TestLabValues(t *testing.T) {
	r := renderLab(t)
	gi := func(s string) resource.Quantity { return resource.MustParse(s) }
	eq := func(what string, got resource.Quantity, want string) {
		t.Helper()
		if got.Cmp(gi(want)) != 0 {
			t.Errorf("%s = %s, want %s", what, got.String(), want)
		}
	}

	rf := find[*kueue.ResourceFlavor](t, r, "ResourceFlavor", "", "rtx-5060-ti")
	if rf.Spec.NodeLabels["nvidia.com/gpu.product"] != "NVIDIA-GeForce-RTX-5060-Ti-SHARED" {
		t.Errorf("ResourceFlavor nodeLabels = %v", rf.Spec.NodeLabels)
	}

	// The general queue owns the card: 8 shares, 12 GiB host memory,
	// 16,311 MiB of GPU memory counted by declaration.
	general := find[*kueue.ClusterQueue](t, r, "ClusterQueue", "", "gpu-general")
	if general.Spec.CohortName != "gpu" || general.Spec.NamespaceSelector == nil || general.Spec.QueueingStrategy != kueue.BestEffortFIFO {
		t.Errorf("gpu-general cohort %q, selector %v, strategy %q", general.Spec.CohortName, general.Spec.NamespaceSelector, general.Spec.QueueingStrategy)
	}
	rg := general.Spec.ResourceGroups[0]
	if got := rg.CoveredResources; len(got) != 3 || got[0] != "nvidia.com/gpu" || got[1] != "memory" || got[2] != "gpupolicy.dev/gpu-memory" {
		t.Errorf("coveredResources = %v", got)
	}
	gq := rg.Flavors[0].Resources
	eq("gpu-general shares", gq[0].NominalQuota, "8")
	eq("gpu-general host memory", gq[1].NominalQuota, "12Gi")
	eq("gpu-general GPU memory", gq[2].NominalQuota, "16311Mi")
	for _, q := range gq {
		if q.BorrowingLimit != nil || q.LendingLimit != nil {
			t.Errorf("gpu-general %s has limits", q.Name)
		}
	}
	if pre := general.Spec.Preemption; pre.WithinClusterQueue != "LowerPriority" || pre.ReclaimWithinCohort != "LowerPriority" || pre.BorrowWithinCohort.Policy != "Never" {
		t.Errorf("gpu-general preemption = %+v", pre)
	}

	// The large-model queue owns nothing and borrows 1 share, 4 GiB and
	// 12,200 MiB; a waking 7B may preempt up to batch (10).
	large := find[*kueue.ClusterQueue](t, r, "ClusterQueue", "", "gpu-large-model")
	lq := large.Spec.ResourceGroups[0].Flavors[0].Resources
	for i, want := range []string{"1", "4Gi", "12200Mi"} {
		eq("gpu-large-model nominal "+string(lq[i].Name), lq[i].NominalQuota, "0")
		if lq[i].BorrowingLimit == nil {
			t.Fatalf("gpu-large-model %s has no borrowingLimit", lq[i].Name)
		}
		eq("gpu-large-model borrowingLimit "+string(lq[i].Name), *lq[i].BorrowingLimit, want)
	}
	bwc := large.Spec.Preemption.BorrowWithinCohort
	if bwc.Policy != "LowerPriority" || bwc.MaxPriorityThreshold == nil || *bwc.MaxPriorityThreshold != 10 {
		t.Errorf("gpu-large-model borrowWithinCohort = %+v", bwc)
	}

	for ns, cq := range map[string]string{"experiments": "gpu-general", "models": "gpu-general", "llm": "gpu-large-model"} {
		l := find[*kueue.LocalQueue](t, r, "LocalQueue", ns, cq)
		if string(l.Spec.ClusterQueue) != cq {
			t.Errorf("LocalQueue %s/%s points at %s", ns, cq, l.Spec.ClusterQueue)
		}
	}
	for name, value := range map[string]int32{"always-on": 1000, "training": 100, "on-demand-llm": 50, "batch": 10} {
		if got := find[*kueue.WorkloadPriorityClass](t, r, "WorkloadPriorityClass", "", name).Value; got != value {
			t.Errorf("WorkloadPriorityClass %s = %d, want %d", name, got, value)
		}
	}

	// The lab takes no Argo lock (Kueue alone gates its steps), so no
	// semaphore ConfigMap is rendered.
	for _, o := range r.Objects {
		if o.Kind == "ConfigMap" && o.Name == "gpu-semaphore" {
			t.Errorf("the lab takes no lock, yet ConfigMap %s/%s is rendered", o.Namespace, o.Name)
		}
	}

	lr := find[*corev1.LimitRange](t, r, "LimitRange", "experiments", contract.LimitRangeName)
	item := lr.Spec.Limits[0]
	if item.Type != corev1.LimitTypeContainer {
		t.Errorf("LimitRange type %s", item.Type)
	}
	eq("LimitRange default", item.Default["gpupolicy.dev/gpu-memory"], "1024Mi")
	eq("LimitRange defaultRequest", item.DefaultRequest["gpupolicy.dev/gpu-memory"], "1024Mi")

	dp := find[*corev1.ConfigMap](t, r, "ConfigMap", "nvidia-device-plugin", "nvidia-device-plugin-config")
	var cfg devicePluginConfig
	if err := yaml.UnmarshalStrict([]byte(dp.Data["rtx-5060-ti"]), &cfg); err != nil {
		t.Fatal(err)
	}
	ts := cfg.Sharing.TimeSlicing
	if cfg.Version != "v1" || ts.RenameByDefault || len(ts.Resources) != 1 || ts.Resources[0].Name != "nvidia.com/gpu" || ts.Resources[0].Replicas != 8 {
		t.Errorf("device plugin config = %+v", cfg)
	}

	for _, o := range r.Objects {
		m := o.Obj.(interface{ GetLabels() map[string]string })
		if l := m.GetLabels(); l[contract.LabelManagedBy] != "gpupolicy" || l[contract.LabelPolicy] != "lab" {
			t.Errorf("%s %s/%s labels = %v", o.Kind, o.Namespace, o.Name, l)
		}
	}
	wantNS := []string{"experiments", "llm", "models", "nvidia-device-plugin"}
	for _, ns := range wantNS {
		find[*corev1.Namespace](t, r, "Namespace", "", ns)
	}
}

func TestLabWorkflowTemplates(t *testing.T) {
	r := renderLab(t)
	cases := []struct {
		name, variant string
		locks         []string
		cache         bool
	}{
		// No Argo lock: Kueue's quota alone gates the steps.
		{"gpu-step", contract.VariantCache, nil, true},
		{"gpu-step-no-cache", contract.VariantCacheFree, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wt := find[*wfv1.WorkflowTemplate](t, r, "WorkflowTemplate", "experiments", c.name)
			if wt.Annotations[contract.AnnotationVariant] != c.variant || wt.Labels[contract.LabelTemplate] != "gpu-step" {
				t.Errorf("variant %q, template label %q", wt.Annotations[contract.AnnotationVariant], wt.Labels[contract.LabelTemplate])
			}
			if wt.Spec.Entrypoint != contract.StepTemplate || len(wt.Spec.Templates) != 1 {
				t.Fatalf("entrypoint %q, %d templates", wt.Spec.Entrypoint, len(wt.Spec.Templates))
			}
			tmpl := wt.Spec.Templates[0]
			if tmpl.Name != contract.StepTemplate || tmpl.Container == nil {
				t.Fatalf("template %q is not a container template", tmpl.Name)
			}
			var locks []string
			if len(c.locks) == 0 && tmpl.Synchronization != nil {
				t.Errorf("takes no lock, yet has synchronization %+v", tmpl.Synchronization)
			}
			if tmpl.Synchronization == nil {
				tmpl.Synchronization = &wfv1.Synchronization{}
			}
			for _, s := range tmpl.Synchronization.Semaphores {
				if s.ConfigMapKeyRef.Name != "gpu-semaphore" {
					t.Errorf("semaphore ConfigMap %q", s.ConfigMapKeyRef.Name)
				}
				locks = append(locks, s.ConfigMapKeyRef.Key)
			}
			if strings.Join(locks, ",") != strings.Join(c.locks, ",") {
				t.Errorf("locks %v, want %v in that order", locks, c.locks)
			}
			if tmpl.Synchronization.Semaphore != nil {
				t.Error("uses the deprecated singular semaphore")
			}
			params := map[string]string{}
			for _, pm := range tmpl.Inputs.Parameters {
				params[pm.Name] = pm.Default.String()
			}
			if params[contract.ParamPriority] != "training" || params[contract.ParamGPUMemory] != "1024Mi" {
				t.Errorf("input defaults = %v, want priority training, gpu-memory 1024Mi", params)
			}
			if l := tmpl.Metadata.Labels; l[contract.LabelKueueQueue] != "gpu-general" || l[contract.LabelKueuePriority] != "{{inputs.parameters.priority}}" {
				t.Errorf("pod labels = %v", l)
			}
			ctr := tmpl.Container
			if ctr.Name != "main" || ctr.Image != "registry.lab.internal/gpu-job:2026.11" || strings.Join(ctr.Command, " ") != "python3 /opt/job/run.py" {
				t.Errorf("container %s %s %v", ctr.Name, ctr.Image, ctr.Command)
			}
			want := map[corev1.ResourceName]string{"nvidia.com/gpu": "1", "memory": "2Gi", "gpupolicy.dev/gpu-memory": "1024Mi"}
			for _, rl := range []corev1.ResourceList{ctr.Resources.Requests, ctr.Resources.Limits} {
				if len(rl) != len(want) {
					t.Errorf("resources %v", rl)
				}
				for n, v := range want {
					if q := rl[n]; q.Cmp(resource.MustParse(v)) != 0 {
						t.Errorf("%s = %s, want %s", n, q.String(), v)
					}
				}
			}
			if tmpl.ActiveDeadlineSeconds == nil || tmpl.ActiveDeadlineSeconds.IntValue() != 3600 {
				t.Errorf("activeDeadlineSeconds = %v", tmpl.ActiveDeadlineSeconds)
			}
			if c.cache {
				if len(tmpl.Volumes) != 1 || tmpl.Volumes[0].PersistentVolumeClaim.ClaimName != "hf-cache" || !tmpl.Volumes[0].PersistentVolumeClaim.ReadOnly {
					t.Errorf("volumes = %+v", tmpl.Volumes)
				}
				if len(ctr.VolumeMounts) != 1 || ctr.VolumeMounts[0].MountPath != "/models/hf" || !ctr.VolumeMounts[0].ReadOnly {
					t.Errorf("mounts = %+v", ctr.VolumeMounts)
				}
			} else if len(tmpl.Volumes) != 0 || len(ctr.VolumeMounts) != 0 {
				t.Errorf("cache-free variant mounts %+v", ctr.VolumeMounts)
			}
		})
	}
}

// The podSpecPatch, applied the way Argo applies it to the pod Argo builds
// (init, wait, main) with the job's own declaration, must leave the pod
// declaring exactly that: Kueue counts the sum over containers (and the
// largest init container), so Argo's containers must declare zero rather
// than take the LimitRange default.
func TestPodSpecPatchDeclaresOnce(t *testing.T) {
	r := renderLab(t)
	wt := find[*wfv1.WorkflowTemplate](t, r, "WorkflowTemplate", "experiments", "gpu-step")
	tmpl := wt.Spec.Templates[0]
	patchYAML := strings.ReplaceAll(tmpl.PodSpecPatch, "{{inputs.parameters.gpu-memory}}", "12452Mi")
	patchJSON, err := yaml.YAMLToJSON([]byte(patchYAML))
	if err != nil {
		t.Fatal(err)
	}
	pod := corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "argoexec"}},
		Containers:     []corev1.Container{{Name: "wait", Image: "argoexec"}, *tmpl.Container.DeepCopy()},
	}
	before, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	after, err := strategicpatch.StrategicMergePatch(before, patchJSON, corev1.PodSpec{})
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.PodSpec
	if err := json.Unmarshal(after, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Containers) != 2 || len(got.InitContainers) != 1 {
		t.Fatalf("patch added containers: %d containers, %d init", len(got.Containers), len(got.InitContainers))
	}
	if got.Containers[0].Name != "wait" || got.Containers[1].Name != "main" {
		t.Errorf("patch reordered Argo's containers: %s, %s", got.Containers[0].Name, got.Containers[1].Name)
	}
	const decl = "gpupolicy.dev/gpu-memory"
	var sum resource.Quantity
	for _, c := range got.Containers {
		req, lim := c.Resources.Requests[decl], c.Resources.Limits[decl]
		if req.Cmp(lim) != 0 {
			t.Errorf("%s: request %s != limit %s", c.Name, req.String(), lim.String())
		}
		sum.Add(req)
		if c.Name == "main" && c.Image == "" {
			t.Error("patch dropped the main container's image")
		}
	}
	if init := got.InitContainers[0].Resources.Requests[decl]; !init.IsZero() {
		t.Errorf("init container declares %s", init.String())
	}
	if sum.Cmp(resource.MustParse("12452Mi")) != 0 {
		t.Errorf("pod declares %s in all, want 12452Mi", sum.String())
	}
	if q := got.Containers[1].Resources.Requests["memory"]; q.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("patch lost the main container's host memory: %s", q.String())
	}
}

func TestDeterministic(t *testing.T) {
	a := renderLab(t)
	b := renderLab(t)
	if strings.Join(a.FileNames(), ",") != strings.Join(b.FileNames(), ",") {
		t.Fatal("file names differ between two renders")
	}
	for _, n := range a.FileNames() {
		if !bytes.Equal(a.Files[n], b.Files[n]) {
			t.Errorf("%s differs between two renders", n)
		}
	}
	for i := 1; i < len(a.Objects); i++ {
		if a.Objects[i-1].File >= a.Objects[i].File {
			t.Errorf("objects not sorted by file: %s before %s", a.Objects[i-1].File, a.Objects[i].File)
		}
	}
}

// The render directory is a kustomize base: building it yields every object.
func TestKustomizeBuild(t *testing.T) {
	r := renderLab(t)
	fs := filesys.MakeFsInMemory()
	for name, b := range r.Files {
		if err := fs.WriteFile("/base/"+name, b); err != nil {
			t.Fatal(err)
		}
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/base")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(m.Resources()), len(r.Objects); got != want {
		t.Errorf("kustomize build has %d objects, render %d", got, want)
	}
	if len(r.Files) != len(r.Objects)+1 {
		t.Errorf("%d files for %d objects (+ kustomization.yaml)", len(r.Files), len(r.Objects))
	}
	for _, o := range r.Objects {
		want := o.Kind
		if o.Namespace != "" {
			want += "_" + o.Namespace
		}
		if o.File != strings.ToLower(want)+"_"+o.Name+".yaml" {
			t.Errorf("%s %s/%s is in %s", o.Kind, o.Namespace, o.Name, o.File)
		}
	}
}

// A policy that the CUE schema and vet rules let through but Kueue's CRD
// rejects is an input error naming the object, the field and the policy
// position.
func TestCRDFailureIsInputError(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(p *policy.Policy)
		field   string
		message string
		pos     string
	}{
		{
			name: "borrowingLimit without cohort",
			mutate: func(p *policy.Policy) {
				q := p.Queues["gpu-large-model"]
				q.Cohort = ""
				p.Queues[q.Name] = q
			},
			field:   "spec",
			message: "borrowingLimit must be nil when cohort is empty",
			pos:     "queues.cue",
		},
		{
			name: "borrowWithinCohort without reclaimWithinCohort",
			mutate: func(p *policy.Policy) {
				q := p.Queues["gpu-large-model"]
				q.Preemption.ReclaimWithinCohort = "Never"
				p.Queues[q.Name] = q
			},
			field:   "spec.preemption",
			message: "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
			pos:     "queues.cue",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := loadLab(t)
			c.mutate(p)
			_, err := Render(p)
			var ds finding.List
			if !errors.As(err, &ds) {
				t.Fatalf("err = %v, want finding.List", err)
			}
			if len(ds) != 1 {
				t.Fatalf("%d diagnostics: %v", len(ds), ds)
			}
			d := ds[0]
			if d.Rule != "crd" || !strings.Contains(d.Message, "ClusterQueue gpu-large-model") ||
				!strings.Contains(d.Message, c.field+": ") || !strings.Contains(d.Message, c.message) {
				t.Errorf("diagnostic = %s", d)
			}
			if !strings.Contains(d.Pos, c.pos) {
				t.Errorf("position %q, want one in %s", d.Pos, c.pos)
			}
		})
	}
}

// A wrong-typed field in an Argo object fails the OpenAPI schema in encode,
// before anything is written.
func TestWrongTypedWorkflowTemplateRejected(t *testing.T) {
	p := loadLab(t)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "WorkflowTemplate",
		"metadata":   map[string]any{"name": "gpu-step", "namespace": "experiments"},
		"spec": map[string]any{
			"entrypoint": "gpu-step",
			"templates": []any{map[string]any{
				"name":                  "gpu-step",
				"activeDeadlineSeconds": true,
				"container":             map[string]any{"name": "main", "image": int64(5060)},
			}},
		},
	}}
	_, err := encode(p, []Object{object(u, []string{"templates", "gpu-step"})})
	var ds finding.List
	if !errors.As(err, &ds) {
		t.Fatalf("err = %v, want diagnostics", err)
	}
	text := ds.Error()
	for _, want := range []string{
		"WorkflowTemplate experiments/gpu-step fails CRD workflowtemplates.argoproj.io/v1alpha1",
		"spec.templates[0].container.image",
		"must be of type string",
		"spec.templates[0].activeDeadlineSeconds",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, text)
		}
	}
	if !strings.Contains(ds[0].Pos, "templates.cue") {
		t.Errorf("position %q, want templates.cue", ds[0].Pos)
	}
}

// With renameByDefault the device plugin advertises nvidia.com/gpu.shared;
// quotas and requests must follow, while the plugin config still names the
// resource it time-slices.
func TestRenameByDefault(t *testing.T) {
	p := loadLab(t)
	p.DevicePlugin.RenameByDefault = true
	r, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	cq := find[*kueue.ClusterQueue](t, r, "ClusterQueue", "", "gpu-general")
	if got := cq.Spec.ResourceGroups[0].CoveredResources[0]; got != "nvidia.com/gpu.shared" {
		t.Errorf("covered %s, want nvidia.com/gpu.shared", got)
	}
	wt := find[*wfv1.WorkflowTemplate](t, r, "WorkflowTemplate", "experiments", "gpu-step")
	if _, ok := wt.Spec.Templates[0].Container.Resources.Requests["nvidia.com/gpu.shared"]; !ok {
		t.Errorf("requests %v", wt.Spec.Templates[0].Container.Resources.Requests)
	}
	dp := find[*corev1.ConfigMap](t, r, "ConfigMap", "nvidia-device-plugin", "nvidia-device-plugin-config")
	if s := dp.Data["rtx-5060-ti"]; !strings.Contains(s, "renameByDefault: true") || !strings.Contains(s, "name: nvidia.com/gpu\n") {
		t.Errorf("device plugin config:\n%s", s)
	}
}

func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, err := policy.Load(labDir()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderOnly renders an already loaded policy (the CRD validator is
// built once per process, before the timer).
func BenchmarkRenderOnly(b *testing.B) {
	p := loadLab(b)
	if _, err := Render(p); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Render(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRender is what gpupolicy render does per policy: load, then
// render.
func BenchmarkRender(b *testing.B) {
	if _, err := Render(loadLab(b)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		p, err := policy.Load(labDir())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Render(p); err != nil {
			b.Fatal(err)
		}
	}
}
