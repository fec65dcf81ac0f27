// Package crdcheck validates Kubernetes custom resources in-process against
// the real CustomResourceDefinitions of the components gpupolicy renders for:
// Kueue v0.17.0 (ClusterQueue, LocalQueue, ResourceFlavor,
// WorkloadPriorityClass), Argo Workflows v3.7.3 (WorkflowTemplate, the
// "full" CRD with the complete schema), and the GitOps engines whose objects
// carry an environment's pin: Flux (source-controller and
// kustomize-controller v1.9.6: GitRepository, Kustomization; v1.10 needs Go
// 1.27) and Argo CD v3.6.1 (Application).
//
// It runs what an API server runs on create, outside an API server, with
// k8s.io/apiextensions-apiserver: unknown fields are reported (as kubectl
// apply's default --validate=strict does), the CRD's defaults are applied, then
// the OpenAPI schema (validation.NewSchemaValidator), the list-type invariants
// and the x-kubernetes-validations CEL rules (schema/cel.NewValidator) are
// checked. So a render that Kueue's own rules reject (a borrowingLimit without
// a cohortName, borrowWithinCohort without reclaimWithinCohort) fails here,
// before it reaches git, naming the object and the field.
//
// The CRDs are copies of the module-cache files (see crds/ and the test that
// keeps them equal); parsing them takes a noticeable fraction of a second, so
// New parses once per process and returns the same Validator afterwards.
package crdcheck

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

//go:embed crds/*.yaml
var crdFiles embed.FS

// Source records where an embedded CRD was copied from: a module at a
// version and a path inside it.
type Source struct {
	File    string // base name under crds/
	Module  string // module path, e.g. "sigs.k8s.io/kueue"
	Version string // e.g. "v0.17.0"
	Path    string // path of the file inside the module
}

// Sources lists every embedded CRD and its origin. To move to a new Kueue or
// Argo release, bump go.mod, update the versions here and copy the files
// again; TestEmbeddedCRDsMatchModuleCache says which copy is stale.
var Sources = []Source{
	{"kueue.x-k8s.io_clusterqueues.yaml", "sigs.k8s.io/kueue", "v0.17.0", "config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml"},
	{"kueue.x-k8s.io_localqueues.yaml", "sigs.k8s.io/kueue", "v0.17.0", "config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml"},
	{"kueue.x-k8s.io_resourceflavors.yaml", "sigs.k8s.io/kueue", "v0.17.0", "config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml"},
	{"kueue.x-k8s.io_workloadpriorityclasses.yaml", "sigs.k8s.io/kueue", "v0.17.0", "config/components/crd/bases/kueue.x-k8s.io_workloadpriorityclasses.yaml"},
	{"argoproj.io_workflowtemplates.yaml", "github.com/argoproj/argo-workflows/v3", "v3.7.3", "manifests/base/crds/full/argoproj.io_workflowtemplates.yaml"},
	// The GitOps engines. Their CRDs are not in the api modules go.mod
	// requires: fetch the controllers' modules with
	//   go mod download github.com/fluxcd/source-controller@v1.9.6 github.com/fluxcd/kustomize-controller@v1.9.6 github.com/argoproj/argo-cd/v3@v3.6.1
	// (Argo CD's Go packages are never imported; only its CRD is copied.)
	{"source.toolkit.fluxcd.io_gitrepositories.yaml", "github.com/fluxcd/source-controller", "v1.9.6", "config/crd/bases/source.toolkit.fluxcd.io_gitrepositories.yaml"},
	{"kustomize.toolkit.fluxcd.io_kustomizations.yaml", "github.com/fluxcd/kustomize-controller", "v1.9.6", "config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml"},
	{"argoproj.io_applications.yaml", "github.com/argoproj/argo-cd/v3", "v3.6.1", "manifests/crds/application-crd.yaml"},
}

// Validator checks objects against the embedded CRDs. It is safe for
// concurrent use.
type Validator struct {
	byGVK map[schema.GroupVersionKind]*crdVersion
}

// crdVersion is one served version of one CRD, ready to validate.
type crdVersion struct {
	crd        string // e.g. "clusterqueues.kueue.x-k8s.io"
	namespaced bool
	structural *structuralschema.Structural
	openapi    apiservervalidation.SchemaValidator
	cel        *cel.Validator // nil when the schema has no CEL rules
}

var (
	once      sync.Once
	shared    *Validator
	sharedErr error
)

// New returns the process-wide Validator, parsing the embedded CRDs on the
// first call only.
func New() (*Validator, error) {
	once.Do(func() { shared, sharedErr = build() })
	return shared, sharedErr
}

func build() (*Validator, error) {
	v := &Validator{byGVK: map[schema.GroupVersionKind]*crdVersion{}}
	names, err := fs.Glob(crdFiles, "crds/*.yaml")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		b, err := crdFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		if err := v.add(name, b); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (v *Validator) add(file string, b []byte) error {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		return fmt.Errorf("crdcheck: parsing %s: %w", file, err)
	}
	for _, ver := range crd.Spec.Versions {
		if !ver.Served || ver.Schema == nil || ver.Schema.OpenAPIV3Schema == nil {
			continue
		}
		var internal apiextensionsinternal.CustomResourceValidation
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(ver.Schema, &internal, nil); err != nil {
			return fmt.Errorf("crdcheck: %s %s: converting the schema: %w", crd.Name, ver.Name, err)
		}
		s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return fmt.Errorf("crdcheck: %s %s: schema is not structural: %w", crd.Name, ver.Name, err)
		}
		// As the API server does: own a copy, and drop defaults that
		// pruning would remove anyway.
		s = s.DeepCopy()
		if err := structuraldefaulting.PruneDefaults(s); err != nil {
			return fmt.Errorf("crdcheck: %s %s: %w", crd.Name, ver.Name, err)
		}
		openapi, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			return fmt.Errorf("crdcheck: %s %s: %w", crd.Name, ver.Name, err)
		}
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Spec.Names.Kind}
		v.byGVK[gvk] = &crdVersion{
			crd:        crd.Name,
			namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			structural: s,
			openapi:    openapi,
			cel:        cel.NewValidator(s, true, celconfig.PerCallLimit),
		}
	}
	return nil
}

// Kinds returns the group/version/kinds the Validator knows, sorted.
func (v *Validator) Kinds() []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, 0, len(v.byGVK))
	for gvk := range v.byGVK {
		out = append(out, gvk)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Has reports whether the Validator has a CRD for gvk.
func (v *Validator) Has(gvk schema.GroupVersionKind) bool {
	_, ok := v.byGVK[gvk]
	return ok
}

// FieldError is one failing field: its path in the object
// ("spec.resourceGroups[0].flavors[0].resources[1].borrowingLimit") and why.
type FieldError struct {
	Field   string
	Message string
}

// Error is the result of a failed validation: the object and each failing
// field.
type Error struct {
	Kind, Namespace, Name string
	// CRD is the CRD and version checked against, e.g.
	// "clusterqueues.kueue.x-k8s.io/v1beta2".
	CRD    string
	Fields []FieldError
	// CELSkipped is true when the object failed the schema in a way that
	// keeps the CRD's CEL rules from running (as in the API server): more
	// errors may follow once these are fixed.
	CELSkipped bool
}

func (e *Error) object() string {
	if e.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", e.Kind, e.Namespace, e.Name)
	}
	return fmt.Sprintf("%s %s", e.Kind, e.Name)
}

func (e *Error) Error() string {
	var b strings.Builder
	if len(e.Fields) == 1 {
		f := e.Fields[0]
		fmt.Fprintf(&b, "%s fails CRD %s: %s: %s", e.object(), e.CRD, f.Field, f.Message)
	} else {
		fmt.Fprintf(&b, "%s fails CRD %s in %d fields:", e.object(), e.CRD, len(e.Fields))
		for _, f := range e.Fields {
			fmt.Fprintf(&b, "\n  %s: %s", f.Field, f.Message)
		}
	}
	if e.CELSkipped {
		b.WriteString("\n  (the CRD's CEL rules were not checked, as the object fails its schema)")
	}
	return b.String()
}

// Validate checks obj against the CRD of its apiVersion and kind, as the API
// server would on create: unknown fields, then defaults, then the OpenAPI
// schema, list types and CEL rules. obj is not modified. The error is an
// *Error naming the object and each failing field, or a plain error for a
// kind without an embedded CRD.
func (v *Validator) Validate(obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	cv, ok := v.byGVK[gvk]
	if !ok {
		return fmt.Errorf("crdcheck: no CRD for %s %q (known: %s)", gvk.String(), obj.GetName(), v.kindList())
	}
	// Round-trip through JSON, decoding numbers as int64 the way the API
	// server does (plain float64 makes int-or-string fields fail), and so
	// work on a copy: defaulting and pruning mutate.
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		return fmt.Errorf("crdcheck: encoding %s %q: %w", gvk.Kind, obj.GetName(), err)
	}
	var u map[string]any
	if err := utiljson.Unmarshal(raw, &u); err != nil {
		return fmt.Errorf("crdcheck: decoding %s %q: %w", gvk.Kind, obj.GetName(), err)
	}

	var errs field.ErrorList
	errs = append(errs, cv.validateMeta(obj)...)
	unknown := structuralpruning.PruneWithOptions(u, cv.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, p := range unknown {
		errs = append(errs, &field.Error{Type: field.ErrorTypeForbidden, Field: p, Detail: "unknown field: the CRD's schema has no such field (kubectl apply --validate=strict rejects it)"})
	}
	structuraldefaulting.Default(u, cv.structural)

	ctx := context.Background()
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u, cv.openapi)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u, cv.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, cv.structural, u)...)
	celSkipped := false
	if cv.cel != nil {
		if blocking(errs) {
			celSkipped = true
		} else {
			celErrs, _ := cv.cel.Validate(ctx, nil, cv.structural, u, nil, celconfig.RuntimeCELCostBudget)
			errs = append(errs, celErrs...)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	e := &Error{Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), CRD: cv.crd + "/" + gvk.Version, CELSkipped: celSkipped}
	seen := map[FieldError]bool{}
	for _, fe := range errs {
		f := FieldError{Field: fe.Field, Message: fe.ErrorBody()}
		if f.Field == "" || f.Field == "<nil>" {
			f.Field = "(object)"
		}
		if seen[f] {
			continue
		}
		seen[f] = true
		e.Fields = append(e.Fields, f)
	}
	return e
}

// validateMeta checks what the API server's generic registry checks of the
// root metadata that matters to a render: a valid name, and a namespace
// exactly when the kind is namespaced.
func (cv *crdVersion) validateMeta(obj *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	name := field.NewPath("metadata", "name")
	if obj.GetName() == "" {
		errs = append(errs, field.Required(name, "name is required"))
	} else {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(obj.GetName()) {
			errs = append(errs, field.Invalid(name, obj.GetName(), msg))
		}
	}
	ns := field.NewPath("metadata", "namespace")
	switch {
	case cv.namespaced && obj.GetNamespace() == "":
		errs = append(errs, field.Required(ns, "the kind is namespaced"))
	case !cv.namespaced && obj.GetNamespace() != "":
		errs = append(errs, field.Invalid(ns, obj.GetNamespace(), "the kind is cluster-scoped"))
	}
	return errs
}

// blocking mirrors the API server: CEL rules are not evaluated when the
// object already fails in a way that makes them meaningless (wrong types,
// missing required fields).
func blocking(errs field.ErrorList) bool {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

func (v *Validator) kindList() string {
	var out []string
	for _, gvk := range v.Kinds() {
		out = append(out, gvk.Kind+"."+gvk.Group+"/"+gvk.Version)
	}
	return strings.Join(out, ", ")
}

// CRD returns an embedded CRD's YAML by its file name under crds/ (see
// Sources), for installing it on a cluster.
func CRD(file string) ([]byte, error) { return crdFiles.ReadFile("crds/" + file) }
