package render

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/crdcheck"
)

// RuleNameClash is two rendered objects of one kind, namespace and name:
// one would overwrite the other (and its file).
var RuleNameClash = finding.Register(finding.Rule{ID: "name-clash", Verb: finding.Vet, Severity: finding.Error,
	Reason: "two things the policy renders cannot share a kind, namespace and name: one object (and one file) would silently replace the other"})

// Check applies every check Render applies before it writes, without
// encoding anything: every lock sized from quota computes to a size (rule
// lock-from-quota), no two objects share a file (rule name-clash), and
// every Kueue and Argo object passes its CRD (rule crd). vet runs it, so
// that a policy that vets renders. The error is a bug or the CRDs failing
// to load, never the policy.
func Check(p *policy.Policy) (finding.List, error) {
	p, sizes, err := admission.SizeLocks(p)
	var ds finding.List
	if errors.As(err, &ds) {
		return ds, nil
	}
	if err != nil {
		return nil, err
	}
	objs := generateObjects(p, sizes, true)
	ds = nameClashes(p, objs)
	v, err := crdcheck.New()
	if err != nil {
		return nil, err
	}
	// Only the kinds with a CRD are encoded: the others (Namespaces,
	// ConfigMaps, the admission policies) have nothing to check here. An
	// object is let go once checked (o.Obj = nil), so that what is left
	// to check is all the collector keeps of them.
	var crd []int
	for i := range objs {
		if o := &objs[i]; v.Has(schema.FromAPIVersionAndKind(o.APIVersion, o.Kind)) {
			crd = append(crd, i)
		} else {
			o.Obj = nil
		}
	}
	for _, i := range crd {
		o := &objs[i]
		u, err := toUnstructured(o.Obj)
		if err != nil {
			return nil, fmt.Errorf("render: encoding %s: %w", objectID(o.Kind, o.Namespace, o.Name), err)
		}
		o.Obj = nil
		// u is Check's own copy, dropped after: validated in place.
		if err := v.ValidateOwned(u); err != nil {
			ds = append(ds, crdDiagnostics(p, o, err)...)
		}
	}
	ds.SortByPos()
	return ds, nil
}

// nameClashes finds objects that would be written to one file, and reports
// each at the policy field that names the later one (or the earlier, when
// render fixes the later one's name).
func nameClashes(p *policy.Policy, objs []Object) finding.List {
	var ds finding.List
	first := map[string]int{}
	for i := range objs {
		o := &objs[i]
		file := fileName(o.Kind, o.Namespace, o.Name)
		j, dup := first[file]
		if !dup {
			first[file] = i
			continue
		}
		a, b := &objs[j], o
		// At the field that names the later object, unless render fixes
		// its name or the earlier one's is the one written out.
		src := nameSource(p, b)
		if as := nameSource(p, a); src == nil || explicitName(as) && !explicitName(src) {
			src = as
		}
		var f finding.Finding
		if o.Kind == "LocalQueue" && a.source[1] == b.source[1] {
			f = RuleNameClash.Newf("%s is rendered twice: queue %q lists namespace %q twice", objectID(o.Kind, o.Namespace, o.Name), b.source[1], o.Namespace)
			src = b.source
		} else {
			f = RuleNameClash.Newf("%s is rendered twice, for %s and for %s: one would replace the other in %s; give one another name",
				objectID(o.Kind, o.Namespace, o.Name), describeSource(p, a), describeSource(p, b), file)
		}
		f.Path, f.Pos = policy.PathString(src...), p.Pos(src...)
		f.Object = o.Kind + "/" + o.Name
		if o.Namespace != "" {
			f.Object = o.Kind + "/" + o.Namespace + "/" + o.Name
		}
		ds = append(ds, f)
	}
	return ds
}

// nameSource is the policy field that names an object; nil when render
// fixes the name (the test job's ConfigMap, the LimitRange).
func nameSource(p *policy.Policy, o *Object) []string {
	switch {
	case o.Kind == "ConfigMap" && len(o.source) == 1 && o.source[0] == "locks":
		return []string{"argo", "semaphoreConfigMap"}
	case o.Kind == "ConfigMap" && len(o.source) == 1 && o.source[0] == "devicePlugin":
		return []string{"devicePlugin", "configMap"}
	case o.Kind == "ConfigMap" && len(o.source) == 1 && o.source[0] == "templates":
		return nil
	case o.Kind == "LimitRange":
		return nil
	case o.Kind == "LocalQueue" && len(o.source) >= 2:
		if q := p.Queues[o.source[1]]; q.LocalQueue != q.Name {
			return []string{"queues", q.Name, "localQueue"}
		}
		return o.source
	case o.Kind == "WorkflowTemplate" && len(o.source) == 3 && o.source[2] == "cacheFree":
		return append(o.source[:3:3], "name")
	}
	return o.source
}

// describeSource says what in the policy an object is rendered for.
func describeSource(p *policy.Policy, o *Object) string {
	switch src := nameSource(p, o); {
	case o.Kind == "ConfigMap" && len(o.source) == 1 && o.source[0] == "templates":
		return "the CUDA test job verify runs (a name render fixes)"
	case o.Kind == "LimitRange":
		return "the GPU-memory default (a name render fixes)"
	case o.Kind == "LocalQueue":
		return fmt.Sprintf("queue %q (its LocalQueue in each of its namespaces)", o.source[1])
	case src != nil:
		return policy.PathString(src...)
	}
	return "the policy"
}

// explicitName reports whether a name source is a field that only names
// something (localQueue, cacheFree.name, a ConfigMap's name), rather than a
// default taken from elsewhere.
func explicitName(src []string) bool {
	if len(src) == 0 {
		return false
	}
	switch src[len(src)-1] {
	case "localQueue", "name", "configMap", "semaphoreConfigMap":
		return true
	}
	return false
}
