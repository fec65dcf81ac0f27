package environment

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// Kustomize has no switch for remote loading: a resource, base or component
// that names a git repository ("github.com/org/repo//dir?ref=v1",
// "git@host:org/repo", "https://host/org/repo.git", "file:///srv/repo")
// makes it run `git clone` into a temporary directory on disk, and a file
// named by an http(s) URL is fetched. checkLocal turns both off: before a
// build, every kustomization of the environment is read, and a reference to
// anything but the environment's own files is an error naming the file and
// line.

// pathLists are the kustomization fields whose items are references to
// files, directories or, for kustomize, remote targets.
var pathLists = map[string]bool{
	"resources": true, "bases": true, "components": true, "crds": true,
	"configurations": true, "generators": true, "transformers": true,
	"validators": true, "patchesStrategicMerge": true,
	// configMapGenerator and secretGenerator: files ([key=]path), envs.
	"files": true, "envs": true,
}

// pathScalars are the fields (at any depth: patches, patchesJson6902,
// replacements, openapi, a generator's env) whose value is a file.
var pathScalars = map[string]bool{"path": true, "env": true}

// checkLocal fails when a kustomization among the environment's files
// refers to a remote target.
func (e *Environment) checkLocal() error {
	kustomizations := map[string]bool{}
	for _, n := range konfig.RecognizedKustomizationFileNames() {
		kustomizations[n] = true
	}
	for _, name := range slices.Sorted(maps.Keys(e.Files)) {
		if !kustomizations[path.Base(name)] {
			continue
		}
		var doc kyaml.Node
		if err := kyaml.Unmarshal(e.Files[name], &doc); err != nil {
			continue // kustomize reports it
		}
		r := checkNode(&doc, "", path.Dir(name))
		switch {
		case r == nil:
		case r.outside:
			return fmt.Errorf("%s/%s:%d: %s: %q is outside the environment; an overlay may use only the files under %s and the policy's render (the resource %q): copy what it names into %s and refer to it by a relative path",
				e.Source, name, r.Line, r.field, r.Value, e.Source, BaseName, e.Source)
		default:
			return fmt.Errorf("%s/%s:%d: %s: %q is remote; gpupolicy builds overlays from the repository alone, with kustomize's remote loading off: copy what it names into %s and refer to it by a relative path",
				e.Source, name, r.Line, r.field, r.Value, e.Source)
		}
	}
	return nil
}

// remoteRef is a reference to a remote target, or to a local path outside
// the environment (outside), in field.
type remoteRef struct {
	*kyaml.Node
	field   string
	outside bool
}

// checkNode walks a kustomization in directory dir (relative to the
// environment) and returns its first remote reference or reference outside
// the environment; field is the key n is the value of.
func checkNode(n *kyaml.Node, field, dir string) *remoteRef {
	switch n.Kind {
	case kyaml.DocumentNode:
		for _, c := range n.Content {
			if r := checkNode(c, "", dir); r != nil {
				return r
			}
		}
	case kyaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			if pathScalars[k] && v.Kind == kyaml.ScalarNode {
				if r := checkRef(v, k, dir); r != nil {
					return r
				}
				continue
			}
			if r := checkNode(v, k, dir); r != nil {
				return r
			}
		}
	case kyaml.SequenceNode:
		for _, c := range n.Content {
			if c.Kind == kyaml.ScalarNode {
				if pathLists[field] {
					if r := checkRef(c, field, dir); r != nil {
						return r
					}
				}
				continue
			}
			if r := checkNode(c, "", dir); r != nil {
				return r
			}
		}
	}
	return nil
}

func checkRef(n *kyaml.Node, field, dir string) *remoteRef {
	_, file, ok := strings.Cut(n.Value, "=") // files: [key=]path
	if remote(n.Value) || remote(file) {
		return &remoteRef{Node: n, field: field}
	}
	if !ok {
		file = n.Value
	}
	if outside(dir, file) {
		return &remoteRef{Node: n, field: field, outside: true}
	}
	return nil
}

// outside reports whether the local path p, named in a kustomization in
// directory dir, leaves the environment: absolute, or climbing above its
// root. Kustomize's root-only load restrictor would refuse it anyway, but
// with a message about the in-memory file system ("'/etc' doesn't exist")
// that names no line.
func outside(dir, p string) bool {
	p = strings.TrimSpace(p)
	if p == "" {
		return false
	}
	if path.IsAbs(p) {
		return true
	}
	c := path.Clean(path.Join(dir, p))
	return c == ".." || strings.HasPrefix(c, "../")
}

var scpUser = regexp.MustCompile(`^[a-z][a-z0-9-]*@`)

// remote reports whether kustomize would clone or fetch s rather than read
// it from the file system: a URL of any scheme ("https://", "ssh://",
// "file://"), an scp-style "user@host:path", or a "github.com/" path.
func remote(s string) bool {
	l := strings.ToLower(strings.TrimSpace(s))
	l = strings.TrimPrefix(l, "git::")
	return strings.Contains(l, "://") || scpUser.MatchString(l) ||
		strings.HasPrefix(l, "github.com/") || strings.HasPrefix(l, "github.com:")
}
