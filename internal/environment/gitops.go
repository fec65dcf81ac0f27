package environment

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/render/crdcheck"
)

// The GitOps engines an environment can name.
const (
	EngineNone   = "none"
	EngineFlux   = "flux"
	EngineArgoCD = "argocd"
)

// GitOpsDirName is the directory, inside environments/ENV, that holds the
// engine's objects.
//
// Where the pin goes. The objects that hand the pin to the engine cannot
// live in deploy/ENV: a render committed at commit X cannot hold X's own
// SHA, so a pin inside the render would chase the render forever. They live
// beside the pin instead, in environments/ENV/gitops, generated from
// environment.yaml: render --env writes them (for the current pin) and
// --check checks them, and `gpupolicy pin` rewrites them in the same commit
// as environment.yaml. The admin applies them once (kubectl apply -f
// environments/ENV/gitops/), or lets the engine sync that directory from the
// branch (a bootstrap Flux Kustomization or an Argo CD app of apps); the
// engine then syncs deploy/ENV at exactly the pinned commit.
const GitOpsDirName = "gitops"

// GitOps are environment.yaml's gitops settings.
type GitOps struct {
	// Engine is flux, argocd or none (the default: reconcile applies the
	// render).
	Engine string `json:"engine,omitempty"`
	// URL is the repository the engine clones.
	URL string `json:"url,omitempty"`
	// Name and Namespace name the engine's objects (default name
	// gpupolicy-ENV; namespace flux-system for Flux, argocd for Argo CD).
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// SecretRef (Flux) names the Secret, in Namespace, with the
	// repository's credentials.
	SecretRef string `json:"secretRef,omitempty"`
	// Project (Argo CD) is the Application's project (default "default").
	Project string `json:"project,omitempty"`
}

// Enabled reports whether an engine syncs the environment.
func (g GitOps) Enabled() bool { return g.Engine == EngineFlux || g.Engine == EngineArgoCD }

func (g GitOps) check() error {
	switch g.Engine {
	case "", EngineNone:
		if g.URL != "" || g.Name != "" || g.Namespace != "" || g.SecretRef != "" || g.Project != "" {
			return fmt.Errorf("engine: set it to %s or %s for the other settings to mean anything", EngineFlux, EngineArgoCD)
		}
		return nil
	case EngineFlux, EngineArgoCD:
	default:
		return fmt.Errorf("engine: %q is not one of %s, %s, %s", g.Engine, EngineFlux, EngineArgoCD, EngineNone)
	}
	if g.URL == "" {
		return fmt.Errorf("url: missing (the repository %s clones)", g.Engine)
	}
	if g.Name != "" {
		if msgs := utilvalidation.IsDNS1123Subdomain(g.Name); len(msgs) > 0 {
			return fmt.Errorf("name: %q: %s", g.Name, strings.Join(msgs, "; "))
		}
	}
	if g.Namespace != "" {
		if msgs := utilvalidation.IsDNS1123Label(g.Namespace); len(msgs) > 0 {
			return fmt.Errorf("namespace: %q: %s", g.Namespace, strings.Join(msgs, "; "))
		}
	}
	if g.SecretRef != "" && g.Engine != EngineFlux {
		return fmt.Errorf("secretRef: only for %s (Argo CD reads repository credentials from its own Secrets)", EngineFlux)
	}
	if g.Project != "" && g.Engine != EngineArgoCD {
		return fmt.Errorf("project: only for %s", EngineArgoCD)
	}
	return nil
}

// EngineRef names the engine object that says what the cluster runs:
// Flux's Kustomization (and its GitRepository, of the same name) or Argo
// CD's Application.
type EngineRef struct {
	Engine, Namespace, Name string
}

// Engine is the environment's engine object, with the defaults applied;
// Engine is "none" when no engine syncs it.
func (e *Environment) Engine() EngineRef {
	g := e.GitOps
	if !g.Enabled() {
		return EngineRef{Engine: EngineNone}
	}
	r := EngineRef{Engine: g.Engine, Namespace: g.Namespace, Name: g.Name}
	if r.Name == "" {
		r.Name = "gpupolicy-" + e.Name
	}
	if r.Namespace == "" {
		r.Namespace = map[string]string{EngineFlux: "flux-system", EngineArgoCD: "argocd"}[g.Engine]
	}
	return r
}

// GitOpsDir is where the environment's engine objects are written,
// relative to the repository root.
func GitOpsDir(name string) string { return path.Join(Root, name, GitOpsDirName) }

// GitOpsDir is where the environment's engine objects are written.
func (e *Environment) GitOpsDir() string { return GitOpsDir(e.Name) }

// GitOpsFiles are the engine objects that carry the pin, one file per
// object (named by FileName), each validated against the engine's CRD.
// They are nil when no engine syncs the environment or it has no pin yet.
func (e *Environment) GitOpsFiles() (map[string][]byte, error) {
	ref := e.Engine()
	if ref.Engine == EngineNone || e.Pin == "" {
		return nil, nil
	}
	var objs []any
	meta0 := metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace}
	switch ref.Engine {
	case EngineFlux:
		repo := &sourcev1.GitRepository{
			TypeMeta:   metav1.TypeMeta{APIVersion: contract.FluxSourceAPIVersion, Kind: sourcev1.GitRepositoryKind},
			ObjectMeta: meta0,
			Spec: sourcev1.GitRepositorySpec{
				URL:       e.GitOps.URL,
				Interval:  metav1.Duration{Duration: time.Minute},
				Reference: &sourcev1.GitRepositoryRef{Commit: e.Pin},
			},
		}
		if e.GitOps.SecretRef != "" {
			repo.Spec.SecretRef = &meta.LocalObjectReference{Name: e.GitOps.SecretRef}
		}
		ks := &kustomizev1.Kustomization{
			TypeMeta:   metav1.TypeMeta{APIVersion: contract.FluxKustomizeAPIVersion, Kind: kustomizev1.KustomizationKind},
			ObjectMeta: meta0,
			Spec: kustomizev1.KustomizationSpec{
				Interval:  metav1.Duration{Duration: 10 * time.Minute},
				Path:      "./" + e.DeployDir(),
				Prune:     true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: ref.Name},
			},
		}
		objs = append(objs, repo, ks)
	case EngineArgoCD:
		project := e.GitOps.Project
		if project == "" {
			project = "default"
		}
		objs = append(objs, map[string]any{
			"apiVersion": contract.ArgoCDAPIVersion,
			"kind":       "Application",
			"metadata":   map[string]any{"name": ref.Name, "namespace": ref.Namespace},
			"spec": map[string]any{
				"project": project,
				"source": map[string]any{
					"repoURL":        e.GitOps.URL,
					"path":           e.DeployDir(),
					"targetRevision": e.Pin,
				},
				"destination": map[string]any{"server": "https://kubernetes.default.svc"},
				"syncPolicy": map[string]any{
					"automated": map[string]any{"prune": true, "selfHeal": true},
				},
			},
		})
	}
	crds, err := crdcheck.New()
	if err != nil {
		return nil, err
	}
	header := Header(e.Name) + fmt.Sprintf(`# The %s objects that sync %s at the pin of environments/%s/environment.yaml.
# gpupolicy pin rewrites them in the pin's commit. Apply them once
# (kubectl apply -f %s/), or let the engine sync this directory from the branch.
`, ref.Engine, e.DeployDir(), e.Name, e.GitOpsDir())
	out := map[string][]byte{}
	for _, o := range objs {
		u, err := toObject(o)
		if err != nil {
			return nil, err
		}
		if err := crds.Validate(u); err != nil {
			return nil, fmt.Errorf("environment %s: the %s object fails its CRD: %w", e.Name, ref.Engine, err)
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		out[FileName(u.GetKind(), u.GetNamespace(), u.GetName())] = append([]byte(header), b...)
	}
	return out, nil
}

// toObject encodes a typed or map object as the API server reads it,
// without the zero status and creation timestamp typed objects carry.
func toObject(o any) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(b, &u.Object); err != nil {
		return nil, err
	}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// GitOpsFileNames lists files, sorted (for messages).
func GitOpsFileNames(files map[string][]byte) []string { return slices.Sorted(maps.Keys(files)) }
