// Package crdgen converts CustomResourceDefinitions at build time into the
// structures the API server validates with, and writes them as Go source, so
// that crdcheck pays nothing at run time for parsing YAML and converting
// schemas (the Argo WorkflowTemplate CRD alone is 1.2 MB of YAML, ~8,400
// schema nodes, a third of a second to parse and convert).
//
// For every served version of a CRD, Convert does what the API server does
// when it loads one (k8s.io/apiextensions-apiserver v0.37,
// crdHandler.getOrCreateServingInfoFor):
//
//   - v1 → internal JSONSchemaProps (Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation);
//   - the structural schema (schema.NewStructural), with the defaults
//     pruning would remove dropped (defaulting.PruneDefaults);
//   - the OpenAPI schema the schema validator runs
//     (validation.ConvertJSONSchemaPropsWithPostProcess with
//     StripUnsupportedFormatsPostProcessorForVersion at the library's
//     default compatibility version, as validation.NewSchemaValidator does).
//
// Documentation that no validator reads (description, title, example,
// externalDocs) is dropped from both. Generate writes each version's two
// structures as one Go function; subtrees that occur more than once (Argo's
// container, volume and probe schemas recur dozens of times) are built once
// and shared, which is safe because validation only reads schemas.
package crdgen

import (
	"bytes"
	"fmt"
	"go/format"
	"io/fs"
	"maps"
	"path"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"
)

// Version is one served version of one CRD, converted.
type Version struct {
	File       string // the CRD's file name, e.g. "kueue.x-k8s.io_clusterqueues.yaml"
	CRD        string // the CRD's name, e.g. "clusterqueues.kueue.x-k8s.io"
	Group      string
	Version    string
	Kind       string
	Namespaced bool
	// Structural is the structural schema, defaults pruned, docs dropped.
	Structural *structuralschema.Structural
	// OpenAPI is the schema the OpenAPI validator checks against.
	OpenAPI *spec.Schema
	// HasRules is whether the schema holds an x-kubernetes-validations
	// rule anywhere (cel.NewValidator returns nil when it does not, after
	// walking every node: 8,400 for Argo's WorkflowTemplate, which has none).
	HasRules bool
	// OldSelfRules are the rules (their text) that refer to oldSelf, as
	// the API server's compiler finds them (cel.Compile's UsesOldSelf):
	// without optionalOldSelf such a transition rule is evaluated on update
	// only, never on create.
	OldSelfRules []string
}

// Convert parses one CRD (YAML) and converts each served version that has
// a schema. The error names the file and version.
func Convert(file string, b []byte) ([]Version, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		return nil, fmt.Errorf("crdgen: parsing %s: %w", file, err)
	}
	var out []Version
	for _, ver := range crd.Spec.Versions {
		if !ver.Served || ver.Schema == nil || ver.Schema.OpenAPIV3Schema == nil {
			continue
		}
		var internal apiextensionsinternal.CustomResourceValidation
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(ver.Schema, &internal, nil); err != nil {
			return nil, fmt.Errorf("crdgen: %s %s: converting the schema: %w", crd.Name, ver.Name, err)
		}
		s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("crdgen: %s %s: schema is not structural: %w", crd.Name, ver.Name, err)
		}
		// As the API server does: own a copy, and drop defaults that
		// pruning would remove anyway.
		s = s.DeepCopy()
		if err := structuraldefaulting.PruneDefaults(s); err != nil {
			return nil, fmt.Errorf("crdgen: %s %s: %w", crd.Name, ver.Name, err)
		}
		openapi := &spec.Schema{}
		strip := apiservervalidation.StripUnsupportedFormatsPostProcessorForVersion(environment.DefaultCompatibilityVersion())
		if err := apiservervalidation.ConvertJSONSchemaPropsWithPostProcess(internal.OpenAPIV3Schema, openapi, strip); err != nil {
			return nil, fmt.Errorf("crdgen: %s %s: converting to OpenAPI: %w", crd.Name, ver.Name, err)
		}
		DropDocs(s)
		DropDocs(openapi)
		oldSelf, err := oldSelfRules(s)
		if err != nil {
			return nil, fmt.Errorf("crdgen: %s %s: %w", crd.Name, ver.Name, err)
		}
		out = append(out, Version{
			File: file, CRD: crd.Name, Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Spec.Names.Kind,
			Namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			Structural: s, OpenAPI: openapi, HasRules: hasRules(s), OldSelfRules: oldSelf,
		})
	}
	return out, nil
}

// hasRules reports whether s or a schema below it has an
// x-kubernetes-validations rule (as cel's hasXValidations, which decides
// whether cel.NewValidator builds anything).
func hasRules(s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	if len(s.XValidations) > 0 || hasRules(s.Items) {
		return true
	}
	if s.AdditionalProperties != nil && hasRules(s.AdditionalProperties.Structural) {
		return true
	}
	for k := range s.Properties {
		p := s.Properties[k]
		if hasRules(&p) {
			return true
		}
	}
	return false
}

// oldSelfRules compiles every x-kubernetes-validations rule of s with the
// API server's compiler (cel.Compile, each node against its own declared
// type, as cel.NewValidator does) and returns, sorted and once each, the
// text of those that refer to oldSelf. Whether a rule refers to the
// variable oldSelf does not depend on the types it is checked against, only
// on the expression's scopes. A rule that fails to compile is an error: the
// API server would not have accepted the CRD.
func oldSelfRules(s *structuralschema.Structural) ([]string, error) {
	found := map[string]bool{}
	base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	var walk func(s *structuralschema.Structural, path string) error
	walk = func(s *structuralschema.Structural, path string) error {
		if s == nil {
			return nil
		}
		if len(s.XValidations) > 0 {
			results, err := cel.Compile(s, model.SchemaDeclType(s, s.XEmbeddedResource), celconfig.PerCallLimit, base, cel.StoredExpressionsEnvLoader())
			if err != nil {
				return fmt.Errorf("compiling the rules at %s: %w", path, err)
			}
			for i, r := range results {
				if r.Error != nil {
					return fmt.Errorf("rule %q at %s: %v", s.XValidations[i].Rule, path, r.Error)
				}
				if r.UsesOldSelf {
					found[s.XValidations[i].Rule] = true
				}
			}
		}
		if err := walk(s.Items, path+"[*]"); err != nil {
			return err
		}
		if s.AdditionalProperties != nil {
			if err := walk(s.AdditionalProperties.Structural, path+"{*}"); err != nil {
				return err
			}
		}
		for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
			p := s.Properties[k]
			if err := walk(&p, path+"."+k); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(s, "(root)"); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(found)), nil
}

// docFields are the schema fields only people read: no validator, defaulter,
// pruner or CEL type reads them (kube-openapi's validate package and
// apiextensions-apiserver's schema packages copy them in conversion only).
var docFields = map[string]bool{"Description": true, "Title": true, "Example": true, "ExternalDocs": true}

// DropDocs zeroes the documentation fields (docFields) of every struct
// reachable from ptr, a pointer to a schema.
func DropDocs(ptr any) { dropDocs(reflect.ValueOf(ptr)) }

func dropDocs(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			dropDocs(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if docFields[f.Name] && v.Field(i).CanSet() {
				v.Field(i).SetZero()
				continue
			}
			dropDocs(v.Field(i))
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			dropDocs(v.Index(i))
		}
	case reflect.Map:
		if v.Type().Elem().Kind() != reflect.Struct {
			for _, k := range v.MapKeys() {
				dropDocs(v.MapIndex(k))
			}
			return
		}
		// Struct values in a map are not addressable: copy, change, put back.
		for _, k := range v.MapKeys() {
			c := reflect.New(v.Type().Elem()).Elem()
			c.Set(v.MapIndex(k))
			dropDocs(c)
			v.SetMapIndex(k, c)
		}
	}
}

// Header is the first comment of the generated file.
const Header = `Code generated by "go generate" (render/crdcheck/gen.go) from crds/*.yaml. DO NOT EDIT.

The CRDs' schemas, converted as the API server converts them (package crdgen).`

// GenerateFS converts every CRD in fsys matching pattern (sorted by name)
// and returns Generate's source for package pkg, with Header.
func GenerateFS(fsys fs.FS, pattern, pkg string) ([]byte, error) {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("crdgen: no file matches %s", pattern)
	}
	var versions []Version
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		vs, err := Convert(path.Base(name), b)
		if err != nil {
			return nil, err
		}
		versions = append(versions, vs...)
	}
	return Generate(pkg, Header, versions)
}

// Generate returns the Go source of package pkg that defines
//
//	var generatedSchemas = []schemaSource{...}
//
// one entry per version (schemaSource is declared by the package, with the
// fields File, CRD, Group, Version, Kind, Namespaced, HasRules, OldSelfRules
// and Build), each Build a
// function that returns the version's Structural and OpenAPI schemas. header
// is written first, as comment lines.
func Generate(pkg, header string, versions []Version) ([]byte, error) {
	var body bytes.Buffer
	g := &gen{imports: map[string]string{}}
	fmt.Fprintf(&body, "var generatedSchemas = []schemaSource{\n")
	for _, v := range versions {
		oldSelf := "nil"
		if len(v.OldSelfRules) > 0 {
			q := make([]string, len(v.OldSelfRules))
			for i, r := range v.OldSelfRules {
				q[i] = strconv.Quote(r)
			}
			oldSelf = "[]string{" + strings.Join(q, ", ") + "}"
		}
		fmt.Fprintf(&body, "\t{File: %q, CRD: %q, Group: %q, Version: %q, Kind: %q, Namespaced: %v, HasRules: %v, OldSelfRules: %s, Build: %s},\n",
			v.File, v.CRD, v.Group, v.Version, v.Kind, v.Namespaced, v.HasRules, oldSelf, funcName(v))
	}
	fmt.Fprintf(&body, "}\n")
	for _, v := range versions {
		fn, err := g.function(v)
		if err != nil {
			return nil, fmt.Errorf("crdgen: %s %s: %w", v.CRD, v.Version, err)
		}
		body.WriteString(fn)
	}

	var out bytes.Buffer
	for _, l := range strings.Split(strings.TrimSpace(header), "\n") {
		fmt.Fprintf(&out, "// %s\n", l)
	}
	fmt.Fprintf(&out, "\npackage %s\n\nimport (\n", pkg)
	paths := make([]string, 0, len(g.imports))
	for p := range g.imports {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(&out, "\t%s %q\n", g.imports[p], p)
	}
	out.WriteString(")\n\n")
	out.Write(body.Bytes())
	src, err := format.Source(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("crdgen: formatting the generated source: %w", err)
	}
	return src, nil
}

// funcName is a version's Build function: schema + Kind + Version, e.g.
// schemaClusterQueueV1beta2.
func funcName(v Version) string {
	return "schema" + v.Kind + strings.ToUpper(v.Version[:1]) + v.Version[1:]
}

// aliases are the import names of the packages the structures use.
var aliases = map[string]string{
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema":      "structuralschema",
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1": "apiextensionsv1",
	"k8s.io/kube-openapi/pkg/validation/spec":                  "spec",
	"k8s.io/utils/ptr": "ptr",
}

// shared are the node types built once per distinct value (a local
// variable each) and referred to by every parent that holds an equal one.
var shared = map[reflect.Type]string{
	reflect.TypeFor[structuralschema.Structural](): "s",
	reflect.TypeFor[spec.Schema]():                 "o",
}

// gen writes Go expressions for values, one function at a time.
type gen struct {
	imports map[string]string // package path → alias, of what was used

	// Per function: the statements, and the variable of each distinct
	// shared node by its expression.
	stmts []string
	vars  map[string]string
	n     int
}

func (g *gen) function(v Version) (string, error) {
	g.stmts, g.vars, g.n = nil, map[string]string{}, 0
	s, err := g.expr(reflect.ValueOf(v.Structural), false)
	if err != nil {
		return "", err
	}
	o, err := g.expr(reflect.ValueOf(v.OpenAPI), false)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n// %s returns the schemas of %s %s (%s), converted from %s: %d distinct nodes, each built once.\n",
		funcName(v), v.Kind, v.Version, v.CRD, v.File, len(g.stmts))
	fmt.Fprintf(&b, "func %s() (*%s, *%s) {\n", funcName(v), g.typeName(reflect.TypeFor[structuralschema.Structural]()), g.typeName(reflect.TypeFor[spec.Schema]()))
	for _, st := range g.stmts {
		b.WriteString("\t" + st + "\n")
	}
	fmt.Fprintf(&b, "\treturn %s, %s\n}\n", s, o)
	return b.String(), nil
}

// typeName is t as Go source, its package imported under its alias.
func (g *gen) typeName(t reflect.Type) string {
	if t.Name() != "" {
		if t.PkgPath() == "" {
			return t.Name()
		}
		a, ok := aliases[t.PkgPath()]
		if !ok {
			a = "unknown_" + strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(t.PkgPath())
		}
		g.imports[t.PkgPath()] = a
		return a + "." + t.Name()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + g.typeName(t.Elem())
	case reflect.Slice:
		return "[]" + g.typeName(t.Elem())
	case reflect.Map:
		return "map[" + g.typeName(t.Key()) + "]" + g.typeName(t.Elem())
	case reflect.Interface:
		if t.NumMethod() == 0 {
			return "any"
		}
	}
	return "unsupported_" + t.String()
}

// expr is v as a Go expression. typed: the expression must carry its own
// type (v is held in an interface), so a number is written int64(1), not 1.
func (g *gen) expr(v reflect.Value, typed bool) (string, error) {
	t := v.Type()
	switch t.Kind() {
	case reflect.Bool:
		s := strconv.FormatBool(v.Bool())
		if t.Name() != "bool" || typed {
			return g.typeName(t) + "(" + s + ")", nil
		}
		return s, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s := strconv.FormatInt(v.Int(), 10)
		if t.PkgPath() != "" || typed || t.Kind() != reflect.Int64 {
			return g.typeName(t) + "(" + s + ")", nil
		}
		return s, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return g.typeName(t) + "(" + strconv.FormatUint(v.Uint(), 10) + ")", nil
	case reflect.Float32, reflect.Float64:
		return g.typeName(t) + "(" + strconv.FormatFloat(v.Float(), 'g', -1, t.Bits()) + ")", nil
	case reflect.String:
		s := strconv.Quote(v.String())
		if t.PkgPath() != "" || (typed && t.Name() != "string") {
			return g.typeName(t) + "(" + s + ")", nil
		}
		return s, nil
	case reflect.Interface:
		if v.IsNil() {
			return "nil", nil
		}
		return g.expr(v.Elem(), true)
	case reflect.Pointer:
		if v.IsNil() {
			return "nil", nil
		}
		e := v.Elem()
		if e.Kind() == reflect.Struct {
			// &v of a shared node's variable, else &T{...}.
			x, err := g.expr(e, false)
			if err != nil {
				return "", err
			}
			return "&" + x, nil
		}
		x, err := g.expr(e, true)
		if err != nil {
			return "", err
		}
		g.imports["k8s.io/utils/ptr"] = "ptr"
		return "ptr.To(" + x + ")", nil
	case reflect.Slice:
		if v.IsNil() {
			return "nil", nil
		}
		elemTyped := t.Elem().Kind() == reflect.Interface
		parts := make([]string, v.Len())
		for i := range parts {
			x, err := g.expr(v.Index(i), elemTyped)
			if err != nil {
				return "", err
			}
			parts[i] = x
		}
		return g.typeName(t) + "{" + strings.Join(parts, ", ") + "}", nil
	case reflect.Map:
		if v.IsNil() {
			return "nil", nil
		}
		if t.Key().Kind() != reflect.String {
			return "", fmt.Errorf("map key type %s not supported", t.Key())
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		elemTyped := t.Elem().Kind() == reflect.Interface
		parts := make([]string, len(keys))
		for i, k := range keys {
			ks, err := g.expr(k, false)
			if err != nil {
				return "", err
			}
			x, err := g.expr(v.MapIndex(k), elemTyped)
			if err != nil {
				return "", err
			}
			parts[i] = ks + ": " + x
		}
		return g.typeName(t) + block(parts), nil
	case reflect.Struct:
		var parts []string
		for i := 0; i < t.NumField(); i++ {
			f, fv := t.Field(i), v.Field(i)
			if fv.IsZero() {
				continue
			}
			if !f.IsExported() {
				return "", fmt.Errorf("%s.%s: an unexported field with a value cannot be written as Go source", t, f.Name)
			}
			x, err := g.expr(fv, false)
			if err != nil {
				return "", fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
			}
			parts = append(parts, f.Name+": "+x)
		}
		prefix, ok := shared[t]
		if !ok {
			return g.typeName(t) + "{" + strings.Join(parts, ", ") + "}", nil
		}
		lit := g.typeName(t) + block(parts)
		if name, ok := g.vars[lit]; ok {
			return name, nil
		}
		g.n++
		name := prefix + strconv.Itoa(g.n)
		g.vars[lit] = name
		g.stmts = append(g.stmts, name+" := "+lit)
		return name, nil
	}
	return "", fmt.Errorf("value of kind %s (%s) not supported", t.Kind(), t)
}

// block is a composite literal's body: one element a line when there are
// several, so that a change to a CRD is a readable diff.
func block(parts []string) string {
	if len(parts) < 2 {
		return "{" + strings.Join(parts, "") + "}"
	}
	return "{\n" + strings.Join(parts, ",\n") + ",\n}"
}
