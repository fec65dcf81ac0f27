// Package environment loads gpupolicy's environments and builds their
// renders.
//
// An environment is a directory environments/ENV holding:
//
//   - environment.yaml, its settings: the policy it deploys (policy:
//     policies/lab), the pin (the full SHA of the commit the cluster syncs
//     from; empty before the first `gpupolicy pin`), and optionally the
//     kubeconfig and context of its cluster and a description;
//   - kustomization.yaml, a kustomize overlay over the policy's render, which
//     it names as the resource "base", plus any patches it uses;
//   - gitops/, generated when environment.yaml names a GitOps engine: the
//     engine's objects carrying the pin (gitops.go).
//
// The render of an environment is the policy's render (package render, a
// kustomize base of flat files) with the overlay applied in-process by
// kustomize's krusty on an in-memory filesystem, split back into flat files
// "<kind>_<namespace>_<name>.yaml" and a kustomization.yaml listing them. It
// is committed under deploy/ENV; the cluster syncs deploy/ENV at the pin.
package environment

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Directories, relative to the repository root.
const (
	// Root holds one directory per environment.
	Root = "environments"
	// DeployRoot holds one committed render per environment.
	DeployRoot = "deploy"
	// SettingsFile is the settings file's name in an environment directory.
	SettingsFile = "environment.yaml"
	// KustomizationFile is the overlay's name in an environment directory.
	KustomizationFile = "kustomization.yaml"
	// BaseName is the resource name under which an overlay refers to the
	// policy's render.
	BaseName = "base"
)

// Settings are an environment's environment.yaml.
type Settings struct {
	// Policy is the policy directory, relative to the repository root.
	Policy string `json:"policy"`
	// Pin is the full SHA of the commit the cluster syncs deploy/ENV from;
	// empty until the first `gpupolicy pin`.
	Pin string `json:"pin"`
	// Kubeconfig and Context name the environment's cluster, for commands
	// that talk to it; the kubeconfig path is relative to the repository
	// root.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
	// Description says what the environment is, in a line.
	Description string `json:"description,omitempty"`
	// GitOps names the GitOps engine that syncs deploy/ENV at the pin and
	// how it reaches the repository (see gitops.go); absent: none.
	GitOps GitOps `json:"gitops,omitempty"`
}

// Environment is one loaded environment.
type Environment struct {
	Name string
	Settings
	// Files are the environment directory's files by slash path relative to
	// it: environment.yaml, kustomization.yaml and whatever the overlay uses.
	Files map[string][]byte
	// Source says where the files were read from (a directory, or
	// "REV:environments/ENV").
	Source string
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// CheckName rejects names that are not a plain lowercase word (they become
// directory names and label values).
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("environment name %q: use lowercase letters, digits and dashes", name)
	}
	return nil
}

// Dir is the environment's directory, relative to the repository root.
func Dir(name string) string { return path.Join(Root, name) }

// DeployDir is where the environment's render is committed, relative to
// the repository root.
func DeployDir(name string) string { return path.Join(DeployRoot, name) }

// SettingsPath is the environment's environment.yaml, relative to the
// repository root.
func SettingsPath(name string) string { return path.Join(Root, name, SettingsFile) }

// Dir is the environment's directory, relative to the repository root.
func (e *Environment) Dir() string { return Dir(e.Name) }

// DeployDir is where the environment's render is committed.
func (e *Environment) DeployDir() string { return DeployDir(e.Name) }

// SettingsPath is the environment's environment.yaml.
func (e *Environment) SettingsPath() string { return SettingsPath(e.Name) }

// Load reads environment name from the environments directory under root
// (the repository root) on disk.
func Load(root, name string) (*Environment, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	dir := filepath.Join(root, Root, name)
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		known, _ := Names(root)
		hint := ""
		if len(known) > 0 {
			hint = " (environments: " + strings.Join(known, ", ") + ")"
		}
		return nil, fmt.Errorf("no environment %q: %s does not exist%s", name, filepath.Join(Root, name), hint)
	}
	files := map[string][]byte{}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	return FromFiles(name, files, filepath.Join(Root, name))
}

// FromFiles builds an environment from its directory's files (e.g. read
// from a git tree); source names where they came from, for messages.
func FromFiles(name string, files map[string][]byte, source string) (*Environment, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	raw, ok := files[SettingsFile]
	if !ok {
		return nil, fmt.Errorf("environment %q: %s/%s is missing", name, source, SettingsFile)
	}
	s, err := ParseSettings(raw)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", source, SettingsFile, err)
	}
	if _, ok := files[KustomizationFile]; !ok {
		return nil, fmt.Errorf("environment %q: %s/%s is missing (the overlay over the policy's render)", name, source, KustomizationFile)
	}
	for p := range files {
		if p == BaseName || strings.HasPrefix(p, BaseName+"/") {
			return nil, fmt.Errorf("environment %q: %s/%s: the name %q is reserved for the policy's render", name, source, p, BaseName)
		}
	}
	return &Environment{Name: name, Settings: s, Files: files, Source: source}, nil
}

// ParseSettings decodes environment.yaml, rejecting unknown fields.
func ParseSettings(b []byte) (Settings, error) {
	var s Settings
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return s, err
	}
	if s.Policy == "" {
		return s, fmt.Errorf("policy: missing (the policy directory, e.g. policies/lab)")
	}
	s.Policy = path.Clean(filepath.ToSlash(s.Policy))
	if path.IsAbs(s.Policy) || strings.HasPrefix(s.Policy, "../") {
		return s, fmt.Errorf("policy: %q must be a directory inside the repository", s.Policy)
	}
	if s.Pin != "" && !fullSHA.MatchString(s.Pin) {
		return s, fmt.Errorf("pin: %q is not a full commit SHA (40 hex digits); set it with gpupolicy pin", s.Pin)
	}
	if err := s.GitOps.check(); err != nil {
		return s, fmt.Errorf("gitops: %w", err)
	}
	return s, nil
}

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

var pinLine = regexp.MustCompile(`(?m)^pin:[ \t]*("[^"\n]*"|'[^'\n]*'|[^#\s]*)([ \t]+#[^\n]*)?[ \t]*$`)

// SetPin returns environment.yaml with its pin set to sha, keeping every
// other line (comments included) as it was.
func SetPin(settings []byte, sha string) ([]byte, error) {
	if !fullSHA.MatchString(sha) {
		return nil, fmt.Errorf("pin %q is not a full commit SHA", sha)
	}
	if _, err := ParseSettings(settings); err != nil {
		return nil, err
	}
	var out []byte
	if loc := pinLine.FindSubmatchIndex(settings); loc != nil {
		comment := ""
		if loc[4] >= 0 {
			comment = string(settings[loc[4]:loc[5]])
		}
		out = append(out, settings[:loc[0]]...)
		out = append(out, fmt.Sprintf("pin: %q%s", sha, comment)...)
		out = append(out, settings[loc[1]:]...)
	} else {
		out = append(out, settings...)
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, '\n')
		}
		out = append(out, fmt.Sprintf("pin: %q\n", sha)...)
	}
	s, err := ParseSettings(out)
	if err != nil || s.Pin != sha {
		return nil, fmt.Errorf("could not set the pin in environment.yaml (edit it by hand: pin: %q)", sha)
	}
	return out, nil
}

// Names lists the environments under root, sorted.
func Names(root string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, Root))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(root, Root, e.Name(), SettingsFile)); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
