// Package render compiles a typed policy into the Kubernetes objects that run
// it: Kueue ResourceFlavors, ClusterQueues, LocalQueues and
// WorkloadPriorityClasses; Argo Workflows WorkflowTemplates and their
// semaphore ConfigMaps; the NVIDIA device plugin's time-slicing ConfigMap; a
// LimitRange per job namespace that gives an undeclared job the default
// GPU-memory declaration; and the Namespaces they live in.
//
// The pipeline is generate → validate → encode → write, and nothing is
// written unless validation passed:
//
//   - generate builds typed objects (Kueue v1beta2, Argo v1alpha1, core v1),
//     never hand-built maps;
//   - validate checks every Kueue and Argo object against the real CRDs
//     (package crdcheck: OpenAPI schema and CEL rules, in-process);
//   - encode writes each as YAML (the encoder of sigs.k8s.io/yaml) with
//     status and creationTimestamp removed; the output is byte-for-byte
//     deterministic;
//   - Write swaps the output directory atomically.
//
// Files are flat and named <kind>_<name>.yaml (cluster-scoped) or
// <kind>_<namespace>_<name>.yaml (namespaced), plus a kustomization.yaml that
// lists them all, so the directory is a kustomize base for the overlays in
// environments/. Every object carries the labels
// app.kubernetes.io/managed-by=gpupolicy and gpupolicy.dev/policy=<name>,
// which reconcile prunes by.
package render

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	ktypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/crdcheck"
)

// KustomizationFile lists every object file of a render.
const KustomizationFile = "kustomization.yaml"

// RuleCRD is the rule of a rendered object that fails its CRD.
var RuleCRD = finding.Register(finding.Rule{ID: "crd", Verb: finding.Render, Severity: finding.Error,
	Reason: "what the policy renders must pass the CRDs of Kueue v0.17.0 and Argo Workflows v3.7.3 (OpenAPI schema and CEL rules), as the API server checks them"})

// Object is one rendered object.
type Object struct {
	APIVersion, Kind, Namespace, Name, File string
	// Obj is the typed object (*kueue.ClusterQueue, *wfv1.WorkflowTemplate,
	// *corev1.ConfigMap, ...).
	Obj runtime.Object

	// source is the policy field the object comes from, for diagnostics.
	source []string
}

// Result is a render: the objects and their files.
type Result struct {
	// Objects are sorted by file name.
	Objects []Object
	// Files maps a file name to its YAML, including KustomizationFile.
	Files map[string][]byte
}

// FileNames returns the names of every file, sorted.
func (r *Result) FileNames() []string {
	out := make([]string, 0, len(r.Files))
	for n := range r.Files {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Render builds every object of the policy as typed Kubernetes objects,
// validates them against the real CRDs (crdcheck), and returns them with
// their YAML files.
//
// A lock sized from quota gets the size the admission model computes
// (admission.SizeLocks); one that computes to no size is an input error
// (a finding.List, rule "lock-from-quota").
//
// A rendered object that fails its CRD is an input error: the result is
// a finding.List (rule "crd"), one per failing field, each at the policy
// field the object comes from. Other errors are bugs or I/O.
func Render(p *policy.Policy) (*Result, error) {
	p, sizes, err := admission.SizeLocks(p)
	if err != nil {
		return nil, err
	}
	objs := generate(p, sizes)
	return encode(p, objs)
}

// encode validates and serializes generated objects.
func encode(p *policy.Policy, objs []Object) (*Result, error) {
	v, err := crdcheck.New()
	if err != nil {
		return nil, err
	}
	if ds := nameClashes(p, objs); len(ds) > 0 {
		ds.SortByPos()
		return nil, ds
	}
	res := &Result{Files: map[string][]byte{}}
	seen := map[string]string{}
	ye, head := newYAMLEncoder(), header(p)
	var ds finding.List
	for i := range objs {
		o := &objs[i]
		o.File = fileName(o.Kind, o.Namespace, o.Name)
		id := objectID(o.Kind, o.Namespace, o.Name)
		if prev, dup := seen[o.File]; dup {
			return nil, fmt.Errorf("render: %s and %s would both be written to %s", prev, id, o.File)
		}
		seen[o.File] = id
		u, err := toUnstructured(o.Obj)
		if err != nil {
			return nil, fmt.Errorf("render: encoding %s: %w", id, err)
		}
		// The YAML of the encoder sigs.k8s.io/yaml.Marshal ends in
		// (go.yaml.in/yaml/v2), given the JSON-decoded object itself:
		// the same bytes (keys sorted, the same scalars), without its
		// JSON encode and YAML re-parse, and most of it written by
		// yamlEncoder rather than yaml.v2's emitter.
		b, err := ye.marshal(head, u.Object)
		if err != nil {
			return nil, fmt.Errorf("render: YAML of %s: %w", id, err)
		}
		// Then validated in place (ValidateOwned may prune and default u,
		// which is not used after): no copy of the object.
		if v.Has(u.GroupVersionKind()) {
			if err := v.ValidateOwned(u); err != nil {
				ds = append(ds, crdDiagnostics(p, o, err)...)
				continue
			}
		}
		res.Files[o.File] = b
		res.Objects = append(res.Objects, *o)
	}
	if len(ds) > 0 {
		return nil, ds
	}
	sort.Slice(res.Objects, func(i, j int) bool { return res.Objects[i].File < res.Objects[j].File })
	k := ktypes.Kustomization{
		TypeMeta: ktypes.TypeMeta{APIVersion: ktypes.KustomizationVersion, Kind: ktypes.KustomizationKind},
	}
	for _, o := range res.Objects {
		k.Resources = append(k.Resources, o.File)
	}
	b, err := yaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	res.Files[KustomizationFile] = append([]byte(header(p)), b...)
	return res, nil
}

func header(p *policy.Policy) string {
	return fmt.Sprintf("# Code generated by gpupolicy render from policy %q. DO NOT EDIT.\n", p.Name)
}

// toUnstructured encodes a typed object as the API server would decode it
// (numbers as int64), without status and without creationTimestamp: null.
// apimachinery's converter walks the object by reflection, with the JSON
// tags, to the map a JSON encode and decode gives (a third of their cost;
// TestToUnstructuredIsJSONRoundTrip).
//
// Except Argo's WorkflowTemplate, which takes that JSON encode and decode
// itself: the converter caches what it learns of each struct field in a
// map it copies whole on every miss (k8s.io/apimachinery
// runtime/converter.go, fieldInfoFromField), so the first conversion of
// Argo's types, hundreds of fields, costs time quadratic in the fields met,
// in every process; encoding/json caches an encoder per type. Measured on
// every object of a render (the conversion alone): the lab 34 → 8.5 ms,
// 1,000 queues 148 → 94 ms; the JSON way for every kind is slower at
// 1,000 queues (205 ms: the Kueue and admission types are small and many).
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	var m map[string]any
	var err error
	if _, argo := obj.(*wfv1.WorkflowTemplate); argo {
		m, err = jsonRoundTrip(obj)
	} else {
		m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	}
	if err != nil {
		return nil, err
	}
	trimEncoded(m)
	return &unstructured.Unstructured{Object: m}, nil
}

// trimEncoded removes from an encoded object what render never writes: the
// status, an empty spec (a Namespace's) and creationTimestamp: null.
func trimEncoded(m map[string]any) {
	delete(m, "status")
	if spec, ok := m["spec"].(map[string]any); ok && len(spec) == 0 {
		delete(m, "spec")
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		if ts, ok := md["creationTimestamp"]; ok && ts == nil {
			delete(md, "creationTimestamp")
		}
	}
}

// jsonRoundTrip is obj encoded with encoding/json and decoded as the API
// server decodes JSON (k8s.io/apimachinery/pkg/util/json: whole numbers as
// int64).
func jsonRoundTrip(obj runtime.Object) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := utiljson.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// fileName is <kind>_<name>.yaml or <kind>_<namespace>_<name>.yaml.
func fileName(kind, namespace, name string) string {
	k := strings.ToLower(kind)
	if namespace == "" {
		return k + "_" + name + ".yaml"
	}
	return k + "_" + namespace + "_" + name + ".yaml"
}

func objectID(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

// crdDiagnostics turns a crdcheck failure into one diagnostic per field, at
// the policy field the object comes from.
func crdDiagnostics(p *policy.Policy, o *Object, err error) finding.List {
	at := func(f finding.Finding, src []string) finding.Finding {
		f.Path, f.Pos, f.Object = policy.PathString(src...), p.Pos(src...), o.Kind+"/"+o.Name
		if o.Namespace != "" {
			f.Object = o.Kind + "/" + o.Namespace + "/" + o.Name
		}
		return f
	}
	ce, ok := err.(*crdcheck.Error)
	if !ok {
		return finding.List{at(RuleCRD.New(err.Error()), o.source)}
	}
	var ds finding.List
	for _, f := range ce.Fields {
		src := refineSource(o, f.Field)
		ds = append(ds, at(RuleCRD.Newf("%s fails CRD %s: %s: %s", objectID(ce.Kind, ce.Namespace, ce.Name), ce.CRD, f.Field, f.Message), src))
	}
	return ds
}

// refineSource points a ClusterQueue's or a Cohort's diagnostic at the
// policy field that produced the failing part of the object, when there is
// one.
func refineSource(o *Object, field string) []string {
	if (o.Kind != "ClusterQueue" && o.Kind != "Cohort") || len(o.source) != 2 {
		return o.source
	}
	switch {
	case strings.HasPrefix(field, "spec.parentName"):
		return append(o.source[:2:2], "parent")
	case strings.HasPrefix(field, "spec.preemption"):
		return append(o.source[:2:2], "preemption")
	case strings.HasPrefix(field, "spec.resourceGroups"):
		return append(o.source[:2:2], "flavors")
	case strings.HasPrefix(field, "spec.cohortName"):
		return append(o.source[:2:2], "cohort")
	}
	return o.source
}
