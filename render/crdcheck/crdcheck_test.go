package crdcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/gpupolicy/gpupolicy/render/crdcheck/internal/crdgen"
)

func validator(t testing.TB) *Validator {
	t.Helper()
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// toUnstructured encodes a typed object the way render does.
func toUnstructured(t testing.TB, obj any) *unstructured.Unstructured {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// clusterQueue builds the lab's large-model queue: owns nothing, borrows one
// share and 12,200 MiB of GPU memory.
type cqBuilder struct{ cq kueue.ClusterQueue }

func clusterQueue(name string) *cqBuilder {
	return &cqBuilder{cq: kueue.ClusterQueue{
		TypeMeta:   metav1.TypeMeta{APIVersion: kueue.GroupVersion.String(), Kind: "ClusterQueue"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			QueueingStrategy:  kueue.BestEffortFIFO,
		},
	}}
}

func (b *cqBuilder) cohort(c string) *cqBuilder {
	b.cq.Spec.CohortName = kueue.CohortReference(c)
	return b
}

func (b *cqBuilder) borrowing(shares int64) *cqBuilder {
	b.cq.Spec.ResourceGroups = []kueue.ResourceGroup{{
		CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"},
		Flavors: []kueue.FlavorQuotas{{
			Name: "rtx-5060-ti",
			Resources: []kueue.ResourceQuota{{
				Name:           "nvidia.com/gpu",
				NominalQuota:   resource.MustParse("0"),
				BorrowingLimit: ptr.To(*resource.NewQuantity(shares, resource.DecimalSI)),
			}},
		}},
	}}
	return b
}

func (b *cqBuilder) preemption(reclaim, borrow kueue.PreemptionPolicy) *cqBuilder {
	b.cq.Spec.Preemption = &kueue.ClusterQueuePreemption{
		WithinClusterQueue:  kueue.PreemptionPolicyNever,
		ReclaimWithinCohort: reclaim,
		BorrowWithinCohort: &kueue.BorrowWithinCohort{
			Policy:               kueue.BorrowWithinCohortPolicy(borrow),
			MaxPriorityThreshold: ptr.To[int32](10),
		},
	}
	return b
}

func (b *cqBuilder) obj(t testing.TB) *unstructured.Unstructured { return toUnstructured(t, b.cq) }

func workflowTemplate() *wfv1.WorkflowTemplate {
	return &wfv1.WorkflowTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "WorkflowTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-step", Namespace: "experiments"},
		Spec: wfv1.WorkflowSpec{
			Entrypoint: "gpu-step",
			Templates: []wfv1.Template{{
				Name:                  "gpu-step",
				ActiveDeadlineSeconds: ptr.To(intOrString(3600)),
				Container: &corev1.Container{
					Name:    "main",
					Image:   "registry.lab.internal/gpu-job:2026.11",
					Command: []string{"python3", "/opt/job/run.py"},
				},
			}},
		},
	}
}

func intOrString(n int32) intstr.IntOrString { return intstr.FromInt32(n) }

func fieldErrors(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *crdcheck.Error, got %T: %v", err, err)
	}
	return e
}

func TestValidObjectsPass(t *testing.T) {
	v := validator(t)
	cases := map[string]*unstructured.Unstructured{
		"borrowing queue in a cohort": clusterQueue("gpu-large-model").cohort("gpu").borrowing(1).
			preemption(kueue.PreemptionPolicyLowerPriority, kueue.PreemptionPolicyLowerPriority).obj(t),
		"queue without cohort or limits": clusterQueue("alone").obj(t),
		"workflow template":              toUnstructured(t, workflowTemplate()),
	}
	for name, obj := range cases {
		t.Run(name, func(t *testing.T) {
			if err := v.Validate(obj); err != nil {
				t.Fatalf("valid object rejected: %v", err)
			}
		})
	}
}

// Kueue's CEL rule on ClusterQueueSpec: "borrowingLimit must be nil when
// cohort is empty".
func TestBorrowingLimitWithoutCohortFailsCEL(t *testing.T) {
	obj := clusterQueue("gpu-large-model").borrowing(1).obj(t)
	err := validator(t).Validate(obj)
	if err == nil {
		t.Fatal("a borrowingLimit without cohortName passed; Kueue rejects it")
	}
	e := fieldErrors(t, err)
	if e.Kind != "ClusterQueue" || e.Name != "gpu-large-model" || e.CRD != "clusterqueues.kueue.x-k8s.io/v1beta2" {
		t.Errorf("error names %s %q (%s), want ClusterQueue gpu-large-model (clusterqueues.kueue.x-k8s.io/v1beta2)", e.Kind, e.Name, e.CRD)
	}
	if len(e.Fields) != 1 || e.Fields[0].Field != "spec" || !strings.Contains(e.Fields[0].Message, "borrowingLimit must be nil when cohort is empty") {
		t.Errorf("fields = %+v, want one on spec: borrowingLimit must be nil when cohort is empty", e.Fields)
	}
	if !strings.Contains(err.Error(), "ClusterQueue gpu-large-model") {
		t.Errorf("message %q does not name the object", err)
	}
}

// The lab's large-model queue as first written: borrowWithinCohort
// LowerPriority with reclaimWithinCohort left at Never, which Kueue's CEL rule
// on ClusterQueuePreemption rejects.
func TestBorrowWithinCohortNeedsReclaim(t *testing.T) {
	v := validator(t)
	for _, reclaim := range []kueue.PreemptionPolicy{kueue.PreemptionPolicyNever, ""} {
		b := clusterQueue("gpu-large-model").cohort("gpu").borrowing(1).
			preemption(reclaim, kueue.PreemptionPolicyLowerPriority)
		err := v.Validate(b.obj(t))
		if err == nil {
			t.Fatalf("reclaimWithinCohort=%q with borrowWithinCohort LowerPriority passed", reclaim)
		}
		e := fieldErrors(t, err)
		if len(e.Fields) != 1 || e.Fields[0].Field != "spec.preemption" || !strings.Contains(e.Fields[0].Message, "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never") {
			t.Errorf("reclaim %q: fields = %+v", reclaim, e.Fields)
		}
	}
}

func TestWrongTypeFailsOpenAPI(t *testing.T) {
	obj := toUnstructured(t, workflowTemplate())
	tmpls, _, _ := unstructured.NestedSlice(obj.Object, "spec", "templates")
	c := tmpls[0].(map[string]any)["container"].(map[string]any)
	c["image"] = int64(42)
	tmpls[0].(map[string]any)["parallelism"] = "four"
	if err := unstructured.SetNestedSlice(obj.Object, tmpls, "spec", "templates"); err != nil {
		t.Fatal(err)
	}
	err := validator(t).Validate(obj)
	if err == nil {
		t.Fatal("a WorkflowTemplate with a number for an image passed")
	}
	e := fieldErrors(t, err)
	if e.Kind != "WorkflowTemplate" || e.Namespace != "experiments" || e.Name != "gpu-step" {
		t.Errorf("error names %s %s/%s", e.Kind, e.Namespace, e.Name)
	}
	want := map[string]string{
		"spec.templates[0].container.image": "must be of type string",
		"spec.templates[0].parallelism":     "must be of type integer",
	}
	for path, msg := range want {
		found := false
		for _, f := range e.Fields {
			if f.Field == path && strings.Contains(f.Message, msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("no error %s: %s in %+v", path, msg, e.Fields)
		}
	}
	if !strings.Contains(err.Error(), "WorkflowTemplate experiments/gpu-step") {
		t.Errorf("message %q does not name the object", err)
	}
}

func TestUnknownFieldReported(t *testing.T) {
	obj := clusterQueue("gpu-general").cohort("gpu").obj(t)
	// cohort was the field's name in v1beta1; v1beta2 calls it cohortName.
	if err := unstructured.SetNestedField(obj.Object, "gpu", "spec", "cohort"); err != nil {
		t.Fatal(err)
	}
	e := fieldErrors(t, validator(t).Validate(obj))
	if len(e.Fields) != 1 || e.Fields[0].Field != "spec.cohort" || !strings.Contains(e.Fields[0].Message, "unknown field") {
		t.Errorf("fields = %+v, want spec.cohort: unknown field", e.Fields)
	}
}

// Numbers decoded as float64 (encoding/json into any) must not make
// int-or-string fields fail: Validate re-decodes as int64.
func TestFloatNumbersAccepted(t *testing.T) {
	b, err := json.Marshal(workflowTemplate())
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := validator(t).Validate(u); err != nil {
		t.Fatal(err)
	}
}

func TestMetadataChecked(t *testing.T) {
	v := validator(t)
	wt := workflowTemplate()
	wt.Namespace = ""
	e := fieldErrors(t, v.Validate(toUnstructured(t, wt)))
	if e.Fields[0].Field != "metadata.namespace" {
		t.Errorf("fields = %+v, want metadata.namespace required", e.Fields)
	}
	cq := clusterQueue("Not_A_Name").obj(t)
	e = fieldErrors(t, v.Validate(cq))
	if e.Fields[0].Field != "metadata.name" {
		t.Errorf("fields = %+v, want metadata.name invalid", e.Fields)
	}
}

func TestUnknownKind(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	u.SetName("x")
	err := validator(t).Validate(u)
	if err == nil || !strings.Contains(err.Error(), "no CRD for") {
		t.Fatalf("err = %v, want no CRD", err)
	}
}

func TestKinds(t *testing.T) {
	v := validator(t)
	for _, gvk := range []schema.GroupVersionKind{
		kueue.GroupVersion.WithKind("ClusterQueue"),
		kueue.GroupVersion.WithKind("LocalQueue"),
		kueue.GroupVersion.WithKind("ResourceFlavor"),
		kueue.GroupVersion.WithKind("WorkloadPriorityClass"),
		{Group: "argoproj.io", Version: "v1alpha1", Kind: "WorkflowTemplate"},
	} {
		if !v.Has(gvk) {
			t.Errorf("no CRD for %s", gvk)
		}
	}
	if v2, _ := New(); v2 != v {
		t.Error("New parsed the CRDs twice")
	}
}

// The embedded CRDs must be the files of the module versions in go.mod.
func TestEmbeddedCRDsMatchModuleCache(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skipf("go env GOMODCACHE: %v", err)
	}
	cache := strings.TrimSpace(string(out))
	embedded, err := crdFiles.ReadDir("crds")
	if err != nil {
		t.Fatal(err)
	}
	if len(embedded) != len(Sources) {
		t.Errorf("crds/ holds %d files, Sources lists %d", len(embedded), len(Sources))
	}
	checked := 0
	for _, s := range Sources {
		got, err := crdFiles.ReadFile("crds/" + s.File)
		if err != nil {
			t.Errorf("%s listed in Sources but not embedded: %v", s.File, err)
			continue
		}
		escaped := escapeModulePath(s.Module)
		path := filepath.Join(cache, escaped+"@"+s.Version, filepath.FromSlash(s.Path))
		want, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			t.Logf("%s: not in the module cache, not compared", path)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		checked++
		if !bytes.Equal(got, want) {
			t.Errorf("crds/%s differs from %s; copy it again", s.File, path)
		}
	}
	if checked == 0 {
		t.Skip("no CRD source in the module cache")
	}
}

// escapeModulePath applies the module cache's case encoding ("!x" for "X").
func escapeModulePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			b.WriteRune(r + ('a' - 'A'))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// BenchmarkLoad measures building one kind's schema validators from the
// generated schemas (load), per kind: what the first Validate of a kind
// pays before CEL.
func BenchmarkLoad(b *testing.B) {
	for _, g := range generatedSchemas {
		b.Run(g.Kind+"."+g.Version, func(b *testing.B) {
			for b.Loop() {
				cv := &crdVersion{crd: g.CRD, namespaced: g.Namespaced, hasRules: g.HasRules, oldSelf: g.OldSelfRules, build: g.Build}
				cv.load()
			}
		})
	}
}

// BenchmarkCELCompile measures compiling the CEL rules of the lab's
// objects (deploy/lab) of each kind that has rules: the rules the object
// can fail (celFor, what Validate compiles) and, for comparison, every
// rule of the CRD (cel.NewValidator of the whole schema).
func BenchmarkCELCompile(b *testing.B) {
	files, err := filepath.Glob("../../deploy/lab/*.yaml")
	if err != nil || len(files) == 0 {
		b.Fatalf("no render in deploy/lab: %v", err)
	}
	seen := map[schema.GroupVersionKind]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			b.Fatal(err)
		}
		gvk := u.GroupVersionKind()
		cv, ok := validator(b).byGVK[gvk]
		if !ok || !cv.hasRules || seen[gvk] {
			continue
		}
		seen[gvk] = true
		cv.load()
		b.Run(gvk.Kind+"/reached", func(b *testing.B) {
			for b.Loop() {
				fresh := &crdVersion{structural: cv.structural, hasRules: true, anyCreateRules: true, oldSelf: cv.oldSelf}
				fresh.celFor(u.Object)
			}
		})
		b.Run(gvk.Kind+"/all", func(b *testing.B) {
			for b.Loop() {
				cel.NewValidator(cv.structural, true, celconfig.PerCallLimit)
			}
		})
	}
}

// The generated schemas are the embedded CRDs converted by crdgen: the
// checked-in schemas_gen.go is what `go generate` writes now, and every
// version's Build returns exactly the structures crdgen.Convert makes from
// the YAML (so the generated Go reproduces the conversion, field for field).
func TestGeneratedSchemasMatchCRDs(t *testing.T) {
	want, err := crdgen.GenerateFS(crdFiles, "crds/*.yaml", "crdcheck")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("schemas_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("schemas_gen.go is stale: run go generate ./render/crdcheck/")
	}

	byKey := map[string]schemaSource{}
	for _, g := range generatedSchemas {
		byKey[g.File+" "+g.Version] = g
	}
	converted := 0
	for _, s := range Sources {
		b, err := crdFiles.ReadFile("crds/" + s.File)
		if err != nil {
			t.Fatal(err)
		}
		versions, err := crdgen.Convert(s.File, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range versions {
			converted++
			g, ok := byKey[v.File+" "+v.Version]
			if !ok {
				t.Errorf("%s %s: no generated schema", v.File, v.Version)
				continue
			}
			if g.CRD != v.CRD || g.Group != v.Group || g.Kind != v.Kind || g.Namespaced != v.Namespaced || g.HasRules != v.HasRules || !slices.Equal(g.OldSelfRules, v.OldSelfRules) {
				t.Errorf("%s %s: generated %+v, converted %s %s %s namespaced=%v", v.File, v.Version, g, v.CRD, v.Group, v.Kind, v.Namespaced)
			}
			s, o := g.Build()
			if !reflect.DeepEqual(s, v.Structural) {
				t.Errorf("%s %s: the generated structural schema differs from the conversion", v.File, v.Version)
			}
			if !reflect.DeepEqual(o, v.OpenAPI) {
				t.Errorf("%s %s: the generated OpenAPI schema differs from the conversion", v.File, v.Version)
			}
			// Skipping cel.NewValidator without rules skips only a nil.
			if hasCEL := cel.NewValidator(s, true, celconfig.PerCallLimit) != nil; hasCEL != g.HasRules {
				t.Errorf("%s %s: HasRules %v, but cel.NewValidator builds a validator: %v", v.File, v.Version, g.HasRules, hasCEL)
			}
		}
	}
	if converted != len(generatedSchemas) || converted < len(Sources) {
		t.Errorf("converted %d versions of %d CRDs, generated %d", converted, len(Sources), len(generatedSchemas))
	}
}

func BenchmarkValidateClusterQueue(b *testing.B) {
	v := validator(b)
	obj := clusterQueue("gpu-large-model").cohort("gpu").borrowing(1).
		preemption(kueue.PreemptionPolicyLowerPriority, kueue.PreemptionPolicyLowerPriority).obj(b)
	for b.Loop() {
		if err := v.Validate(obj); err != nil {
			b.Fatal(err)
		}
	}
}

// As in the API server, CEL rules do not run on an object that fails the
// schema's types or enums; the error says so rather than passing them.
func TestCELSkippedOnSchemaFailure(t *testing.T) {
	obj := clusterQueue("gpu-large-model").borrowing(1).obj(t) // also breaks a CEL rule
	if err := unstructured.SetNestedField(obj.Object, "Random", "spec", "queueingStrategy"); err != nil {
		t.Fatal(err)
	}
	e := fieldErrors(t, validator(t).Validate(obj))
	if !e.CELSkipped || len(e.Fields) != 1 || e.Fields[0].Field != "spec.queueingStrategy" {
		t.Errorf("CELSkipped %v, fields %+v", e.CELSkipped, e.Fields)
	}
	if !strings.Contains(e.Error(), "CEL rules were not checked") {
		t.Errorf("message %q", e)
	}
}

// celCases are objects that break CEL rules at every level of the Kueue
// CRDs that have them, with the lab's render (deploy/lab) beside them.
func celCases(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	parse := func(y string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
			t.Fatal(err)
		}
		return u
	}
	cases := map[string]*unstructured.Unstructured{
		"CQ borrowing without cohort": clusterQueue("q").borrowing(1).obj(t),
		"CQ borrowWithinCohort without reclaim": clusterQueue("q").cohort("gpu").borrowing(1).
			preemption(kueue.PreemptionPolicyNever, kueue.PreemptionPolicyLowerPriority).obj(t),
		"CQ flavors and coveredResources disagree": parse(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: q}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, memory]
    flavors:
    - name: f
      resources: [{name: nvidia.com/gpu, nominalQuota: "1"}]`),
		"CQ flavorFungibility preference with MayStopSearch": parse(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: q}
spec:
  flavorFungibility: {preference: BorrowingOverPreemption, whenCanBorrow: MayStopSearch, whenCanPreempt: TryNextFlavor}`),
		"RF topology without nodeLabels": parse(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t}`),
		"RF tolerations broken": parse(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
spec:
  nodeLabels: {a: b}
  tolerations:
  - {operator: Equal, effect: NoSchedule}
  - {key: k, operator: Exists, value: v, tolerationSeconds: 5}`),
		"RF nodeTaints broken": parse(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
spec:
  nodeTaints: [{key: k, effect: Sometimes}]`),
		"RF v1beta1 tolerations broken": parse(`
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec:
  tolerations: [{operator: Sideways}]`),
		"LQ": parse(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: n}
spec: {clusterQueue: q}`),
	}
	files, err := filepath.Glob("../../deploy/lab/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no render in deploy/lab: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cases["lab "+filepath.Base(f)] = parse(string(b))
	}
	return cases
}

// Compiling only the CEL rules of the nodes an object reaches (celFor)
// gives the object exactly the errors that every rule of the CRD compiled
// (cel.NewValidator of the whole schema, as the API server does) gives it.
func TestCELReachedRulesMatchAllRules(t *testing.T) {
	v := validator(t)
	failing := 0
	for name, obj := range celCases(t) {
		cv, ok := v.byGVK[obj.GroupVersionKind()]
		if !ok || !cv.hasRules {
			continue
		}
		cv.load()
		u := toUnstructured(t, obj.Object).Object // as the API server decodes it
		structuralpruning.PruneWithOptions(u, cv.structural, true, structuralschema.UnknownFieldPathOptions{})
		structuraldefaulting.Default(u, cv.structural)

		ctx := context.Background()
		all, _ := cel.NewValidator(cv.structural, true, celconfig.PerCallLimit).Validate(ctx, nil, cv.structural, u, nil, celconfig.RuntimeCELCostBudget)
		var reached field.ErrorList
		if r := cv.celFor(u); r != nil {
			reached, _ = r.Validate(ctx, nil, cv.structural, u, nil, celconfig.RuntimeCELCostBudget)
		}
		if got, want := errorStrings(reached), errorStrings(all); !slices.Equal(got, want) {
			t.Errorf("%s: reached rules give %q, all rules %q", name, got, want)
		}
		if len(all) > 0 {
			failing++
		}
	}
	if failing < 7 {
		t.Errorf("only %d cases break a CEL rule; the comparison proves little", failing)
	}
}

func errorStrings(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	slices.Sort(out)
	return out
}

// A ResourceFlavor that leaves out tolerations and taints reaches one rule
// node (spec); one with tolerations, two. celFor compiles one validator per
// version, for the union of the nodes reached so far: again only when an
// object reaches a node outside it.
func TestCELCompiledForUnionOfReachedNodes(t *testing.T) {
	cv := build().byGVK[kueue.GroupVersion.WithKind("ResourceFlavor")] // fresh: nothing compiled
	cv.load()
	labels := map[string]any{"spec": map[string]any{"nodeLabels": map[string]any{"a": "b"}}}
	tolerating := map[string]any{"spec": map[string]any{"tolerations": []any{map[string]any{"operator": "Exists"}}}}
	tainted := map[string]any{"spec": map[string]any{"nodeTaints": []any{map[string]any{"key": "k", "effect": "NoSchedule"}}}}
	spec, tolerations, taints := stepProperty+"spec", stepProperty+"spec"+stepProperty+"tolerations", stepProperty+"spec"+stepProperty+"nodeTaints"
	steps := []struct {
		name      string
		obj       map[string]any
		compiles  int
		nodes     []string
		sameAsPrv bool
	}{
		{"nodeLabels", labels, 1, []string{spec}, false},
		{"nodeLabels again", labels, 1, []string{spec}, true},
		{"tolerations", tolerating, 2, []string{spec, tolerations}, false},
		{"nodeLabels after tolerations", labels, 2, []string{spec, tolerations}, true},
		{"nodeTaints", tainted, 3, []string{spec, taints, tolerations}, false},
		{"tolerations after nodeTaints", tolerating, 3, []string{spec, taints, tolerations}, true},
	}
	var prev *cel.Validator
	for _, s := range steps {
		v := cv.celFor(s.obj)
		if v == nil {
			t.Fatalf("%s: no validator", s.name)
		}
		if got := slices.Sorted(maps.Keys(cv.celNodes)); cv.celCompiles != s.compiles || !slices.Equal(got, s.nodes) {
			t.Errorf("%s: %d compiles for nodes %q, want %d for %q", s.name, cv.celCompiles, got, s.compiles, s.nodes)
		}
		if (v == prev) != s.sameAsPrv {
			t.Errorf("%s: validator %p, the previous one %p: want the same %v", s.name, v, prev, s.sameAsPrv)
		}
		prev = v
	}
	reached := map[string]bool{}
	cv.reachRules(cv.structural, tolerating, "", reached)
	if len(reached) != 2 || !reached[spec] || !reached[tolerations] {
		t.Errorf("reached %q, want spec and spec.tolerations", slices.Collect(maps.Keys(reached)))
	}
	// A LocalQueue's one rule (clusterQueue is immutable) is a transition
	// rule: nothing to compile for a create.
	lq := build().byGVK[kueue.GroupVersion.WithKind("LocalQueue")]
	lq.load()
	if v := lq.celFor(map[string]any{"spec": map[string]any{"clusterQueue": "q"}}); v != nil || lq.celCompiles != 0 {
		t.Errorf("a CEL validator for a LocalQueue, whose only rule runs on update (%d compiles)", lq.celCompiles)
	}
}

// Every CEL case and lab object, validated one after another by one
// Validator (so most of them get a validator compiled for nodes other
// objects reached, in both orders), gets exactly the errors a Validator of
// its own, fresh, gives it: a union validator's extra rules never run.
func TestCELUnionValidatorGivesEachObjectItsOwnErrors(t *testing.T) {
	cases := celCases(t)
	var names []string
	for name, obj := range cases {
		if validator(t).Has(obj.GroupVersionKind()) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	want := map[string][]string{}
	celFailing := 0
	for _, name := range names {
		want[name] = validationErrors(build(), cases[name])
		if strings.Contains(strings.Join(want[name], "\n"), "Invalid value") {
			celFailing++
		}
	}
	if celFailing < 7 {
		t.Errorf("only %d cases break a CEL rule; the comparison proves little", celFailing)
	}
	backward := slices.Clone(names)
	slices.Reverse(backward)
	for _, order := range [][]string{names, backward} {
		shared := build()
		reused := 0
		for _, name := range order {
			obj := cases[name]
			cv := shared.byGVK[obj.GroupVersionKind()]
			before := cv.celCompiles
			if got := validationErrors(shared, obj); !slices.Equal(got, want[name]) {
				t.Errorf("%s after other objects: %q, alone %q", name, got, want[name])
			}
			ran := !slices.Contains(want[name], "(CEL skipped)")
			if r := reachedBy(t, cv, obj); ran && len(r) > 0 && cv.celCompiles == before && !containsAll(r, cv.celNodes) {
				reused++ // a validator with nodes obj does not reach
			}
		}
		t.Logf("%d objects validated by a validator compiled for more nodes than they reach", reused)
		if reused == 0 {
			t.Errorf("no object got a validator compiled for more nodes than it reaches: the comparison proves nothing")
		}
	}
}

// validationErrors is v.Validate(obj) as sorted lines: each failing field
// and whether the CEL rules were skipped, or the error's text.
func validationErrors(v *Validator, obj *unstructured.Unstructured) []string {
	err := v.Validate(obj)
	var e *Error
	if !errors.As(err, &e) {
		if err != nil {
			return []string{err.Error()}
		}
		return nil
	}
	var out []string
	for _, f := range e.Fields {
		out = append(out, f.Field+": "+f.Message)
	}
	slices.Sort(out)
	if e.CELSkipped {
		out = append(out, "(CEL skipped)")
	}
	return out
}

// reachedBy is the rule nodes obj reaches once pruned and defaulted.
func reachedBy(t *testing.T, cv *crdVersion, obj *unstructured.Unstructured) map[string]bool {
	t.Helper()
	u := toUnstructured(t, obj.Object).Object
	cv.prepare(u)
	reached := map[string]bool{}
	cv.reachRules(cv.structural, u, "", reached)
	return reached
}

// A rule that refers to oldSelf runs on create when it is marked
// optionalOldSelf (oldSelf is then none): celFor keeps it, and drops only
// the plain transition rule.
func TestCELKeepsOptionalOldSelfRules(t *testing.T) {
	optional := true
	specNode := structuralschema.Structural{
		Generic:    structuralschema.Generic{Type: "object"},
		Properties: map[string]structuralschema.Structural{"a": {Generic: structuralschema.Generic{Type: "string"}}},
		ValidationExtensions: structuralschema.ValidationExtensions{XValidations: apiextensionsv1.ValidationRules{
			{Rule: "self.a != 'bad'", Message: "create rule"},
			{Rule: "self.a == oldSelf.a", Message: "transition rule"},
			{Rule: "oldSelf.hasValue() || self.a != 'new-bad'", Message: "optional oldSelf rule", OptionalOldSelf: &optional},
		}},
	}
	root := &structuralschema.Structural{
		Generic:    structuralschema.Generic{Type: "object"},
		Properties: map[string]structuralschema.Structural{"spec": specNode},
	}
	cv := &crdVersion{hasRules: true, oldSelf: []string{"self.a == oldSelf.a", "oldSelf.hasValue() || self.a != 'new-bad'"},
		build: func() (*structuralschema.Structural, *spec.Schema) { return root, &spec.Schema{} }}
	cv.load()
	ctx := context.Background()
	for a, want := range map[string]string{"bad": "create rule", "new-bad": "optional oldSelf rule", "fine": ""} {
		obj := map[string]any{"spec": map[string]any{"a": a}}
		all, _ := cel.NewValidator(root, true, celconfig.PerCallLimit).Validate(ctx, nil, root, obj, nil, celconfig.RuntimeCELCostBudget)
		r := cv.celFor(obj)
		if r == nil {
			t.Fatalf("a=%s: no validator", a)
		}
		got, _ := r.Validate(ctx, nil, root, obj, nil, celconfig.RuntimeCELCostBudget)
		if !slices.Equal(errorStrings(got), errorStrings(all)) {
			t.Errorf("a=%s: reached rules give %q, all rules %q", a, errorStrings(got), errorStrings(all))
		}
		if msg := strings.Join(errorStrings(got), ";"); want == "" && msg != "" || !strings.Contains(msg, want) {
			t.Errorf("a=%s: errors %q, want %q", a, msg, want)
		}
	}
}

// A schema with a rule nested in allOf gets every rule compiled: the
// nested one fails an object that reaches no other rule.
func TestCELNestedRulesCompileEverything(t *testing.T) {
	str := structuralschema.Structural{Generic: structuralschema.Generic{Type: "string"}}
	root := &structuralschema.Structural{
		Generic: structuralschema.Generic{Type: "object"},
		Properties: map[string]structuralschema.Structural{
			"spec": {
				Generic:    structuralschema.Generic{Type: "object"},
				Properties: map[string]structuralschema.Structural{"a": str},
				ValueValidation: &structuralschema.ValueValidation{AllOf: []structuralschema.NestedValueValidation{{
					ValidationExtensions: structuralschema.ValidationExtensions{XValidations: apiextensionsv1.ValidationRules{{Rule: "self.a != 'x'", Message: "nested rule"}}},
				}}},
			},
			"other": {
				Generic:              str.Generic,
				ValidationExtensions: structuralschema.ValidationExtensions{XValidations: apiextensionsv1.ValidationRules{{Rule: "self != 'y'", Message: "top rule"}}},
			},
		},
	}
	cv := &crdVersion{hasRules: true, build: func() (*structuralschema.Structural, *spec.Schema) { return root, &spec.Schema{} }}
	cv.load()
	if !cv.nestedRules {
		t.Fatal("nested rule not seen")
	}
	obj := map[string]any{"spec": map[string]any{"a": "x"}}
	ctx := context.Background()
	all, _ := cel.NewValidator(root, true, celconfig.PerCallLimit).Validate(ctx, nil, root, obj, nil, celconfig.RuntimeCELCostBudget)
	r := cv.celFor(obj)
	if r == nil {
		t.Fatal("no validator")
	}
	got, _ := r.Validate(ctx, nil, root, obj, nil, celconfig.RuntimeCELCostBudget)
	if msg := strings.Join(errorStrings(got), ";"); !strings.Contains(msg, "nested rule") || !slices.Equal(errorStrings(got), errorStrings(all)) {
		t.Errorf("errors %q, all rules %q", errorStrings(got), errorStrings(all))
	}
}
