// Package drift finds and explains the differences between two renders of
// an environment: on the git side, the render at the commit the cluster is
// pinned to against the render at HEAD; in a pull request (package plan),
// the render at the base against the render at the head.
//
// Differences are semantic, not textual: objects are matched by kind,
// namespace and name; fields by path, with lists of named items (templates,
// flavors, resources, parameters) keyed by name; quantities compare by value
// ("1Gi" equals "1024Mi"). Each difference carries, where the lab's model
// knows it, its consequence in the lab's words: a pin whose WorkflowTemplates
// lack the GPU-memory declaration counts every job at the LimitRange default.
//
// A comparison has two Sides. The git side reads renders straight from git
// objects (GitSide); a live side (the cluster) plugs in through the same
// interface.
package drift

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/yaml"
)

// Object is one object of a render.
type Object struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	// File is the render's file that holds it.
	File string
	// Body is the object as decoded JSON (numbers int64 or float64).
	Body map[string]any
}

// Ref names the object: Kind/namespace/name, or Kind/name when it is
// cluster-scoped.
func (o *Object) Ref() string { return Ref(o.Kind, o.Namespace, o.Name) }

// Ref names an object: Kind/namespace/name, or Kind/name.
func Ref(kind, namespace, name string) string {
	if namespace == "" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}

// Set is a render as objects, keyed by Ref.
type Set map[string]*Object

// Refs returns the set's object names, sorted by kind, namespace and name.
func (s Set) Refs() []string {
	out := make([]string, 0, len(s))
	for r := range s {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// OfKind returns the objects of one kind, sorted by Ref.
func (s Set) OfKind(kind string) []*Object {
	var out []*Object
	for _, o := range s {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref() < out[j].Ref() })
	return out
}

// Parse reads a render's files (file name → YAML, one or more documents
// each) into a Set. kustomization.yaml files and empty documents are
// skipped; an object that appears twice is an error.
func Parse(files map[string][]byte) (Set, error) {
	set := Set{}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if base := name[strings.LastIndex(name, "/")+1:]; base == "kustomization.yaml" || base == "kustomization.yml" || base == "Kustomization" {
			continue
		}
		if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") && !strings.HasSuffix(name, ".json") {
			continue
		}
		docs, err := splitDocuments(files[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, doc := range docs {
			o, err := decode(doc)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if o == nil {
				continue
			}
			o.File = name
			if prev, dup := set[o.Ref()]; dup {
				return nil, fmt.Errorf("%s: %s is also in %s", name, o.Ref(), prev.File)
			}
			set[o.Ref()] = o
		}
	}
	return set, nil
}

func splitDocuments(b []byte) ([][]byte, error) {
	r := kio.ByteReader{Reader: bytes.NewReader(b), OmitReaderAnnotations: true}
	nodes, err := r.Read()
	if err != nil {
		if err == io.EOF {
			return nil, nil
		}
		return nil, err
	}
	var out [][]byte
	for _, n := range nodes {
		s, err := n.String()
		if err != nil {
			return nil, err
		}
		out = append(out, []byte(s))
	}
	return out, nil
}

func decode(doc []byte) (*Object, error) {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(j)) == 0 || string(bytes.TrimSpace(j)) == "null" {
		return nil, nil
	}
	var body map[string]any
	// apimachinery's json keeps integers as int64.
	if err := utiljson.Unmarshal(j, &body); err != nil {
		return nil, err
	}
	if body == nil {
		return nil, nil
	}
	o := &Object{Body: body}
	o.APIVersion, _ = body["apiVersion"].(string)
	o.Kind, _ = body["kind"].(string)
	if md, ok := body["metadata"].(map[string]any); ok {
		o.Name, _ = md["name"].(string)
		o.Namespace, _ = md["namespace"].(string)
	}
	if o.Kind == "" || o.Name == "" {
		return nil, fmt.Errorf("a document without kind or metadata.name")
	}
	return o, nil
}

// lookup returns the value at a path of keys (string for maps, a name for
// lists of named items, an int for list indexes).
func lookup(v any, keys ...any) (any, bool) {
	for _, k := range keys {
		switch c := v.(type) {
		case map[string]any:
			s, ok := k.(string)
			if !ok {
				return nil, false
			}
			v, ok = c[s]
			if !ok {
				return nil, false
			}
		case []any:
			switch kk := k.(type) {
			case int:
				if kk < 0 || kk >= len(c) {
					return nil, false
				}
				v = c[kk]
			case string:
				found := false
				for _, it := range c {
					if ItemName(it) == kk {
						v, found = it, true
						break
					}
				}
				if !found {
					return nil, false
				}
			default:
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return v, true
}

func str(v any, keys ...any) string {
	x, ok := lookup(v, keys...)
	if !ok || x == nil {
		return ""
	}
	if s, ok := x.(string); ok {
		return s
	}
	return fmt.Sprint(x)
}
