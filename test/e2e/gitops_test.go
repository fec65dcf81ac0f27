package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/drift/live"
	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/render/crdcheck"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
)

var gvrCRD = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func decodeYAML(t *testing.T, b []byte) *unstructured.Unstructured {
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

// installCRD creates one of the engines' embedded CRDs (the very file
// render validates against) and waits until it is served.
func installCRD(t *testing.T, ctx context.Context, dyn dynamic.Interface, file string) {
	t.Helper()
	b, err := crdcheck.CRD(file)
	if err != nil {
		t.Fatal(err)
	}
	crd := decodeYAML(t, b)
	if _, err := dyn.Resource(gvrCRD).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating CRD %s: %v", crd.GetName(), err)
	}
	t.Cleanup(func() { _ = dyn.Resource(gvrCRD).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{}) })
	clustertest.WaitFor(t, ctx, "CRD "+crd.GetName()+" established", func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(gvrCRD).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return clustertest.ConditionTrue(u, "Established"), nil
	})
}

// renderSet renders the local environment from p.
func renderSet(t *testing.T, env *environment.Environment, p *policy.Policy) drift.Set {
	t.Helper()
	files, err := env.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	set, err := drift.Parse(files)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestGitOpsEngineOffPin installs Flux's and Argo CD's CRDs, creates the
// engine objects render --env writes (no engine controller runs), writes
// their status as the engine would, and checks that drift --live's engine
// check reads the synced revision: on the pin, nothing; on an older commit
// whose render has the main lock at 1, engine-off-pin with what that
// commit lacks; a spec left behind by a moved pin, engine-stale.
func TestGitOpsEngineOffPin(t *testing.T) {
	c := clustertest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, err := kube.ForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn := admin.Dynamic
	for _, f := range []string{"source.toolkit.fluxcd.io_gitrepositories.yaml", "kustomize.toolkit.fluxcd.io_kustomizations.yaml", "argoproj.io_applications.yaml"} {
		installCRD(t, ctx, dyn, f)
	}

	const pin, old = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	env, err := environment.Load("../..", "local")
	if err != nil {
		t.Fatal(err)
	}
	p, err := clustertest.LabPolicy()
	if err != nil {
		t.Fatal(err)
	}
	// The synced commit has the main lock at 1, the pin at 4 (the series'
	// step 3): what the synced commit lacks is the lock's new size.
	atPin, atOld := renderSet(t, env, clustertest.WithLock(p, "main", 4)), renderSet(t, env, clustertest.WithLock(p, "main", 1))
	compare := func(_ context.Context, rev string) (*drift.Report, error) {
		if rev != old {
			t.Errorf("compared %s, want the synced commit %s", rev, old)
		}
		r := &drift.Report{Environment: "local", Differences: drift.Compare(atOld, atPin)}
		drift.Explain(r.Differences, atOld, atPin, live.EngineSides)
		return r, nil
	}

	for _, engine := range []string{environment.EngineFlux, environment.EngineArgoCD} {
		t.Run(engine, func(t *testing.T) {
			e := *env
			e.Pin = pin
			e.GitOps = environment.GitOps{Engine: engine, URL: "https://git.lab.internal/lab/gpu-policy.git"}
			ref := e.Engine()
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ref.Namespace}}
			if _, err := c.Clientset().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			target := live.EngineTarget{EngineRef: ref, Env: "local", Pin: pin, Compare: compare}

			// Before the admin applies environments/local/gitops.
			got, err := live.ReadEngine(ctx, dyn, target)
			if err != nil {
				t.Fatal(err)
			}
			assertRules(t, "before apply", got.Findings(), "engine-missing")

			files, err := e.GitOpsFiles()
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range environment.GitOpsFileNames(files) {
				u := decodeYAML(t, files[name])
				gvr := map[string]schema.GroupVersionResource{"GitRepository": contract.GVRFluxGitRepository, "Kustomization": contract.GVRFluxKustomization, "Application": contract.GVRArgoCDApplication}[u.GetKind()]
				_, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("creating %s from %s: %v", u.GetKind(), name, err)
				}
				t.Cleanup(func() {
					_ = dyn.Resource(gvr).Namespace(u.GetNamespace()).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
				})
			}
			gvr := contract.GVRFluxKustomization
			field := []string{"status", "lastAppliedRevision"}
			rev := func(sha string) string { return "sha1:" + sha }
			if engine == environment.EngineArgoCD {
				gvr, field, rev = contract.GVRArgoCDApplication, []string{"status", "sync", "revision"}, func(sha string) string { return sha }
			}
			// The engine's status, written by the test: no controller runs.
			writeStatus := func(sha string) {
				t.Helper()
				cur, err := dyn.Resource(gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if err := unstructured.SetNestedField(cur.Object, rev(sha), field...); err != nil {
					t.Fatal(err)
				}
				if engine == environment.EngineArgoCD { // the CRD requires it beside the revision
					_ = unstructured.SetNestedField(cur.Object, "Synced", "status", "sync", "status")
				}
				if engine == environment.EngineFlux {
					_, err = dyn.Resource(gvr).Namespace(ref.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
				} else { // Argo CD's CRD has no status subresource
					_, err = dyn.Resource(gvr).Namespace(ref.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
				}
				if err != nil {
					t.Fatal(err)
				}
			}

			got, err = live.ReadEngine(ctx, dyn, target)
			if err != nil {
				t.Fatal(err)
			}
			assertRules(t, "applied, not synced yet", got.Findings(), "engine-off-pin")

			writeStatus(pin)
			got, err = live.ReadEngine(ctx, dyn, target)
			if err != nil {
				t.Fatal(err)
			}
			assertRules(t, "on the pin", got.Findings())

			writeStatus(old)
			got, err = live.ReadEngine(ctx, dyn, target)
			if err != nil {
				t.Fatal(err)
			}
			fs := assertRules(t, "on an older commit", got.Findings(), "engine-off-pin")
			if len(fs) == 1 && !strings.Contains(fs[0].Message, "the cluster runs deploy/local at 2222222") {
				t.Errorf("engine-off-pin: %s", fs[0].Message)
			}
			if got.Lacks == nil || !hasPath(got.Lacks.Differences, "data.main") {
				t.Errorf("what the synced commit lacks: %+v", got.Lacks)
			}
		})
	}
}

func assertRules(t *testing.T, when string, fs finding.List, want ...string) finding.List {
	t.Helper()
	var got []string
	for _, f := range fs {
		got = append(got, f.Rule)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s: findings %v, want %v: %+v", when, got, want, fs)
	}
	return fs
}

func hasPath(ds []drift.Difference, path string) bool {
	for _, d := range ds {
		if d.Path == path {
			return true
		}
	}
	return false
}
