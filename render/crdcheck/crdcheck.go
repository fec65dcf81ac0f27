// Package crdcheck validates Kubernetes custom resources in-process against
// the real CustomResourceDefinitions of the components gpupolicy renders for:
// Kueue v0.17.0 (ClusterQueue, Cohort, LocalQueue, ResourceFlavor,
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
// keeps them equal). Parsing and converting them took a third of a second
// per process, so it is done at build time: schemas_gen.go holds each
// served version's structural and OpenAPI schemas as Go (package
// internal/crdgen writes it, `go generate ./render/crdcheck/` after a CRD
// changes; TestGeneratedSchemasMatchCRDs fails while it is stale). At run
// time a version's schemas are built on the first Validate of that kind,
// and of its CEL rules only those that can fail the objects validated are
// compiled (celFor: one validator per version, for all its objects), so a
// command pays for what it checks. What reads nothing of an object's
// metadata (pruning, defaulting, the OpenAPI schema, list types and,
// without a rule at the root, the CEL rules), most of an object's cost,
// runs once per distinct content of a kind: objects equal but for their
// metadata share its errors (memo.go); the name and namespace are checked
// per object.
package crdcheck

//go:generate go run gen.go

import (
	"embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/utils/ptr"
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
	{"kueue.x-k8s.io_cohorts.yaml", "sigs.k8s.io/kueue", "v0.17.0", "config/components/crd/bases/kueue.x-k8s.io_cohorts.yaml"},
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

// schemaSource is one served version of one CRD, converted at build time
// (schemas_gen.go, written by internal/crdgen).
type schemaSource struct {
	File       string // base name under crds/
	CRD        string // e.g. "clusterqueues.kueue.x-k8s.io"
	Group      string
	Version    string
	Kind       string
	Namespaced bool
	// HasRules is whether the schema has an x-kubernetes-validations rule;
	// without one there is no CEL validator to build.
	HasRules bool
	// OldSelfRules are the rules (their text) that refer to oldSelf, as
	// the API server's compiler finds them.
	OldSelfRules []string
	// Build returns the version's structural schema (defaults pruned) and
	// its OpenAPI schema, a fresh copy each call.
	Build func() (*structuralschema.Structural, *spec.Schema)
}

// Validator checks objects against the embedded CRDs. It is safe for
// concurrent use.
type Validator struct {
	byGVK map[schema.GroupVersionKind]*crdVersion
}

// crdVersion is one served version of one CRD. Its validators are built on
// first use (load, celFor).
type crdVersion struct {
	crd        string // e.g. "clusterqueues.kueue.x-k8s.io"
	namespaced bool
	hasRules   bool     // the schema has x-kubernetes-validations rules
	oldSelf    []string // rules that refer to oldSelf (schemaSource.OldSelfRules)
	build      func() (*structuralschema.Structural, *spec.Schema)

	once        sync.Once
	structural  *structuralschema.Structural
	openapi     apiservervalidation.SchemaValidator
	nestedRules bool // rules inside allOf/anyOf/oneOf/not (hasNestedRules)
	// anyCreateRules is whether a node has a rule that can run on create
	// (hasCreateRules): without one, celFor has nothing to compile.
	anyCreateRules bool

	// The CEL validator celFor hands out: compiled for the union
	// celNodes of the rule-bearing schema nodes the objects validated so
	// far reach (nil celNodes: every rule, a schema with nested rules).
	// celCompiles counts the cel.NewValidator calls.
	celMu        sync.Mutex
	celValidator *cel.Validator
	celNodes     map[string]bool
	celCompiles  int

	// memo holds the results of the checks that read nothing of an
	// object's metadata, by content (memo.go).
	memo contentMemo
}

// load builds the version's schema validators once: the structural schema
// and the OpenAPI schema validator (validation.NewSchemaValidatorFromOpenAPI,
// what NewSchemaValidator returns after converting the schema).
func (cv *crdVersion) load() {
	cv.once.Do(func() {
		s, o := cv.build()
		cv.structural = s
		cv.openapi = apiservervalidation.NewSchemaValidatorFromOpenAPI(o)
		cv.memo.enabled = metadataIsAnyObject(o) && structuralMetadataIsAnyObject(s)
		cv.nestedRules = cv.hasRules && hasNestedRules(s)
		cv.anyCreateRules = cv.hasRules && cv.hasCreateRules(s)
		cv.memo.cel = cv.memo.enabled && !cv.nestedRules && len(cv.createRules(s)) == 0
	})
}

// celFor returns the CEL validator for obj: the schema's
// x-kubernetes-validations rules that can fail it, and maybe others that
// cannot, compiled (cel.NewValidator). The API server compiles every rule
// of the CRD, but on create evaluates (cel's Validator.validate,
// validateExpressions)
//
//   - a rule only at a node where the object has a non-null value: it
//     returns at a nil value and descends only into the properties,
//     additional properties and items the object has. A ResourceFlavor
//     without tolerations cannot fail the five tolerations rules;
//   - no transition rule: one that refers to oldSelf without
//     optionalOldSelf runs only when there is an old object (a
//     LocalQueue's "clusterQueue is immutable").
//
// So a validator of the rules that can run on create (createRules) at any
// set of nodes holding the ones obj reaches (reachRules) gives obj the same
// errors: the rules at the other nodes are never evaluated and spend none
// of the cost budget. celFor keeps one validator per version, compiled for
// the union of the nodes the objects it was asked for reach, and compiles
// it again, for the grown union, only when an object reaches a node
// outside it: at most once per rule node of the schema, where a validator
// per set of reached nodes was compiled once per set (a ClusterQueue
// without resourceGroups after one with them now compiles nothing). Where
// every object of a kind reaches the same nodes (each kind of the lab, the
// department and the 1,000-queue bench policy) it is compiled once, as
// before. Nil when no rule can fail obj, found without walking obj when
// the schema has no rule that runs on create (a LocalQueue's).
//
// A schema with rules nested in allOf/anyOf/oneOf/not (no CRD gpupolicy
// embeds has one) gets every rule compiled, as in the API server: which of
// those run is not worked out here.
func (cv *crdVersion) celFor(obj map[string]any) *cel.Validator {
	var reached map[string]bool
	if !cv.nestedRules {
		if !cv.anyCreateRules {
			return nil
		}
		reached = map[string]bool{}
		cv.reachRules(cv.structural, obj, "", reached)
		if len(reached) == 0 {
			return nil
		}
	}

	cv.celMu.Lock()
	defer cv.celMu.Unlock()
	if cv.celValidator != nil && (reached == nil || containsAll(cv.celNodes, reached)) {
		return cv.celValidator
	}
	s := cv.structural
	if reached != nil {
		if cv.celNodes == nil {
			cv.celNodes = map[string]bool{}
		}
		maps.Copy(cv.celNodes, reached)
		s, _ = cv.keepRules(cv.structural, "", cv.celNodes)
	}
	cv.celValidator = cel.NewValidator(s, true, celconfig.PerCallLimit)
	cv.celCompiles++
	return cv.celValidator
}

// containsAll reports whether every key of sub is in set.
func containsAll(set, sub map[string]bool) bool {
	for k := range sub {
		if !set[k] {
			return false
		}
	}
	return true
}

// Path steps of a schema node below its parent, in reachRules and
// keepRules: a property (followed by its name), additional properties,
// items. Two nodes could share a path only through a property name holding
// NUL; that would keep the other node's rules too, never drop one.
const (
	stepProperty   = "\x00p"
	stepAdditional = "\x00a"
	stepItems      = "\x00i"
)

// createRules are the rules of node s that can run on create: all but the
// transition rules (oldSelf without optionalOldSelf).
func (cv *crdVersion) createRules(s *structuralschema.Structural) apiextensionsv1.ValidationRules {
	if len(cv.oldSelf) == 0 {
		return s.XValidations
	}
	var out apiextensionsv1.ValidationRules
	for _, r := range s.XValidations {
		if slices.Contains(cv.oldSelf, r.Rule) && !ptr.Deref(r.OptionalOldSelf, false) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// hasCreateRules reports whether a node of s (its properties, additional
// properties and items, as reachRules walks them) holds a rule that can
// run on create (createRules).
func (cv *crdVersion) hasCreateRules(s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	if len(s.XValidations) > 0 && len(cv.createRules(s)) > 0 {
		return true
	}
	if cv.hasCreateRules(s.Items) || s.AdditionalProperties != nil && cv.hasCreateRules(s.AdditionalProperties.Structural) {
		return true
	}
	for k := range s.Properties {
		p := s.Properties[k]
		if cv.hasCreateRules(&p) {
			return true
		}
	}
	return false
}

// reachRules records in reached the path of every node of s that holds
// a rule that can run on create (createRules) and where obj has a non-null
// value, walking obj the way cel's Validator does (properties and
// additional properties of a map, items of a list).
func (cv *crdVersion) reachRules(s *structuralschema.Structural, obj any, path string, reached map[string]bool) {
	if s == nil || obj == nil {
		return
	}
	if len(s.XValidations) > 0 && len(cv.createRules(s)) > 0 {
		reached[path] = true
	}
	switch o := obj.(type) {
	case map[string]any:
		for k, v := range o {
			if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
				cv.reachRules(s.AdditionalProperties.Structural, v, path+stepAdditional, reached)
			}
			if p, ok := s.Properties[k]; ok {
				cv.reachRules(&p, v, path+stepProperty+k, reached)
			}
		}
	case []any:
		for _, v := range o {
			cv.reachRules(s.Items, v, path+stepItems, reached)
		}
	}
}

// keepRules returns s with the rules that can run on create (createRules)
// at the nodes whose paths are in keep, and no other
// x-kubernetes-validations rule; the rest of the schema (its types) is
// unchanged, so each kept rule compiles exactly as in the whole schema.
// Subtrees without a removed rule are shared, not copied; changed reports
// whether anything was removed.
func (cv *crdVersion) keepRules(s *structuralschema.Structural, path string, keep map[string]bool) (out *structuralschema.Structural, changed bool) {
	if s == nil {
		return nil, false
	}
	c := *s
	if len(s.XValidations) > 0 {
		var rules apiextensionsv1.ValidationRules
		if keep[path] {
			rules = cv.createRules(s)
		}
		if len(rules) != len(s.XValidations) {
			c.XValidations, changed = rules, true
		}
	}
	if it, ch := cv.keepRules(s.Items, path+stepItems, keep); ch {
		c.Items, changed = it, true
	}
	if s.AdditionalProperties != nil {
		if ap, ch := cv.keepRules(s.AdditionalProperties.Structural, path+stepAdditional, keep); ch {
			c.AdditionalProperties = &structuralschema.StructuralOrBool{Structural: ap, Bool: s.AdditionalProperties.Bool}
			changed = true
		}
	}
	var props map[string]structuralschema.Structural
	for k := range s.Properties {
		p := s.Properties[k]
		if np, ch := cv.keepRules(&p, path+stepProperty+k, keep); ch {
			if props == nil {
				props = maps.Clone(s.Properties)
			}
			props[k] = *np
		}
	}
	if props != nil {
		c.Properties, changed = props, true
	}
	if !changed {
		return s, false
	}
	return &c, true
}

// hasNestedRules reports whether a node of s has rules inside
// allOf/anyOf/oneOf/not value validations (no CRD gpupolicy embeds has
// any; celFor compiles every rule of such a schema).
func hasNestedRules(s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	if vv := s.ValueValidation; vv != nil {
		for _, n := range slices.Concat(vv.AllOf, vv.AnyOf, vv.OneOf) {
			if nestedHasRules(&n) {
				return true
			}
		}
		if vv.Not != nil && nestedHasRules(vv.Not) {
			return true
		}
	}
	if hasNestedRules(s.Items) || s.AdditionalProperties != nil && hasNestedRules(s.AdditionalProperties.Structural) {
		return true
	}
	for k := range s.Properties {
		p := s.Properties[k]
		if hasNestedRules(&p) {
			return true
		}
	}
	return false
}

func nestedHasRules(n *structuralschema.NestedValueValidation) bool {
	if n == nil {
		return false
	}
	if len(n.XValidations) > 0 || nestedHasRules(n.Items) || nestedHasRules(n.AdditionalProperties) {
		return true
	}
	for _, c := range slices.Concat(n.AllOf, n.AnyOf, n.OneOf) {
		if nestedHasRules(&c) {
			return true
		}
	}
	if nestedHasRules(n.Not) {
		return true
	}
	for k := range n.Properties {
		p := n.Properties[k]
		if nestedHasRules(&p) {
			return true
		}
	}
	return false
}

var (
	once   sync.Once
	shared *Validator
)

// New returns the process-wide Validator. It builds nothing: each kind's
// schemas and CEL rules are built on its first Validate. The error is
// always nil; it stays in the signature for callers that handle one.
func New() (*Validator, error) {
	once.Do(func() { shared = build() })
	return shared, nil
}

func build() *Validator {
	v := &Validator{byGVK: make(map[schema.GroupVersionKind]*crdVersion, len(generatedSchemas))}
	for _, g := range generatedSchemas {
		gvk := schema.GroupVersionKind{Group: g.Group, Version: g.Version, Kind: g.Kind}
		v.byGVK[gvk] = &crdVersion{crd: g.CRD, namespaced: g.Namespaced, hasRules: g.HasRules, oldSelf: g.OldSelfRules, build: g.Build}
	}
	return v
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
	return cv.validate(gvk, obj, u)
}

// ValidateOwned is Validate for a caller that hands obj over and does not
// use it after: obj.Object must be as the API server decodes JSON (numbers
// int64, as k8s.io/apimachinery/pkg/util/json.Unmarshal gives them; only
// maps, slices, strings, bools, int64 and float64), and is checked in
// place, without Validate's copy: unknown fields may be pruned from it and
// the CRD's defaults set in it, or not (when an object equal to it but
// for metadata was checked before, memo.go), so it is left in no promised
// state. The result is Validate's.
func (v *Validator) ValidateOwned(obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	cv, ok := v.byGVK[gvk]
	if !ok {
		return fmt.Errorf("crdcheck: no CRD for %s %q (known: %s)", gvk.String(), obj.GetName(), v.kindList())
	}
	return cv.validate(gvk, obj, obj.Object)
}

// validate checks u, the JSON-decoded content of obj, which it may modify
// (pruning, defaulting); obj's metadata is read before u changes.
func (cv *crdVersion) validate(gvk schema.GroupVersionKind, obj *unstructured.Unstructured, u map[string]any) error {
	namespace, name := obj.GetNamespace(), obj.GetName()
	cv.load()
	// The object's own errors: its name and namespace. Then those of its
	// content (unknown fields, the schema, list types, CEL rules), shared
	// by objects equal but for their metadata (memo.go).
	own := cv.validateMeta(obj)
	content, prepared := cv.contentChecks(u)
	var celFields []FieldError
	celSkipped := false
	if cv.hasRules {
		if blocking(own) || content.blocking {
			celSkipped = true
		} else {
			celFields = cv.celErrors(content, u, prepared)
		}
	}
	if len(own) == 0 && len(content.fields) == 0 && len(celFields) == 0 {
		return nil
	}
	e := &Error{Kind: gvk.Kind, Namespace: namespace, Name: name, CRD: cv.crd + "/" + gvk.Version, CELSkipped: celSkipped}
	seen := map[FieldError]bool{}
	for _, f := range slices.Concat(asFields(own), content.fields, celFields) {
		if seen[f] {
			continue
		}
		seen[f] = true
		e.Fields = append(e.Fields, f)
	}
	return e
}

// prepare does to u what the API server does before it validates an
// object: prunes the fields the schema does not have
// (pruning.PruneWithOptions, at the root: apiVersion, kind and metadata are
// left alone), returning an error for each, and sets the schema's defaults
// (defaulting.Default).
func (cv *crdVersion) prepare(u map[string]any) field.ErrorList {
	var errs field.ErrorList
	unknown := structuralpruning.PruneWithOptions(u, cv.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, p := range unknown {
		errs = append(errs, &field.Error{Type: field.ErrorTypeForbidden, Field: p, Detail: "unknown field: the CRD's schema has no such field (kubectl apply --validate=strict rejects it)"})
	}
	structuraldefaulting.Default(u, cv.structural)
	return errs
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
