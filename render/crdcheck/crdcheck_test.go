package crdcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
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

func BenchmarkNewUncached(b *testing.B) {
	for b.Loop() {
		if _, err := build(); err != nil {
			b.Fatal(err)
		}
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
