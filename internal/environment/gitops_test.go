package environment

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/gpupolicy/gpupolicy/render/crdcheck"
)

const testPin = "0123456789abcdef0123456789abcdef01234567"

func gitopsEnv(t *testing.T, g GitOps) *Environment {
	t.Helper()
	if err := g.check(); err != nil {
		t.Fatal(err)
	}
	return &Environment{Name: "lab", Settings: Settings{Policy: "policies/lab", Pin: testPin, GitOps: g}}
}

// decodeFile reads one generated file back as the API server would.
func decodeFile(t *testing.T, b []byte) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(j, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestGitOpsFilesFlux(t *testing.T) {
	e := gitopsEnv(t, GitOps{Engine: EngineFlux, URL: "https://git.lab.internal/lab/gpu-policy.git"})
	files, err := e.GitOpsFiles()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(GitOpsFileNames(files), " "); got != "gitrepository_flux-system_gpupolicy-lab.yaml kustomization_flux-system_gpupolicy-lab.yaml" {
		t.Fatalf("files: %s", got)
	}
	v, _ := crdcheck.New()
	repo := decodeFile(t, files["gitrepository_flux-system_gpupolicy-lab.yaml"])
	if c, _, _ := unstructured.NestedString(repo.Object, "spec", "ref", "commit"); c != testPin {
		t.Errorf("spec.ref.commit = %q, want the pin", c)
	}
	ks := decodeFile(t, files["kustomization_flux-system_gpupolicy-lab.yaml"])
	if p, _, _ := unstructured.NestedString(ks.Object, "spec", "path"); p != "./deploy/lab" {
		t.Errorf("spec.path = %q", p)
	}
	for _, u := range []*unstructured.Unstructured{repo, ks} {
		if err := v.Validate(u); err != nil {
			t.Error(err)
		}
	}
	// The CRD is really applied: a Kustomization without its source fails.
	unstructured.RemoveNestedField(ks.Object, "spec", "sourceRef")
	if err := v.Validate(ks); err == nil || !strings.Contains(err.Error(), "sourceRef") {
		t.Errorf("a Kustomization without sourceRef: %v", err)
	}
}

func TestGitOpsFilesArgoCD(t *testing.T) {
	e := gitopsEnv(t, GitOps{Engine: EngineArgoCD, URL: "https://git.lab.internal/lab/gpu-policy.git", Namespace: "gitops"})
	files, err := e.GitOpsFiles()
	if err != nil {
		t.Fatal(err)
	}
	b, ok := files["application_gitops_gpupolicy-lab.yaml"]
	if !ok {
		t.Fatalf("files: %v", GitOpsFileNames(files))
	}
	app := decodeFile(t, b)
	if r, _, _ := unstructured.NestedString(app.Object, "spec", "source", "targetRevision"); r != testPin {
		t.Errorf("targetRevision = %q, want the pin", r)
	}
	v, _ := crdcheck.New()
	unstructured.RemoveNestedField(app.Object, "spec", "destination")
	if err := v.Validate(app); err == nil || !strings.Contains(err.Error(), "destination") {
		t.Errorf("an Application without a destination: %v", err)
	}
}

func TestGitOpsNoneOrUnpinned(t *testing.T) {
	e := gitopsEnv(t, GitOps{})
	if files, err := e.GitOpsFiles(); err != nil || files != nil {
		t.Errorf("engine none: %v %v", files, err)
	}
	e = gitopsEnv(t, GitOps{Engine: EngineFlux, URL: "https://x"})
	e.Pin = ""
	if files, err := e.GitOpsFiles(); err != nil || files != nil {
		t.Errorf("unpinned: %v %v", files, err)
	}
}

func TestGitOpsSettingsErrors(t *testing.T) {
	for _, c := range []struct {
		yaml, want string
	}{
		{"policy: p\ngitops: {engine: fluxcd, url: x}\n", `engine: "fluxcd" is not one of`},
		{"policy: p\ngitops: {engine: flux}\n", "url: missing"},
		{"policy: p\ngitops: {url: x}\n", "engine: set it to flux or argocd"},
		{"policy: p\ngitops: {engine: argocd, url: x, secretRef: s}\n", "secretRef: only for flux"},
		{"policy: p\ngitops: {engine: flux, url: x, namespace: Flux_System}\n", "namespace:"},
		{"policy: p\ngitops: {engine: flux, url: x, branch: main}\n", "unknown field"},
	} {
		_, err := ParseSettings([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.yaml, err, c.want)
		}
	}
}
