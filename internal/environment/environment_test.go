package environment_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo/gittest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render"
)

const repoRoot = "../.."

func renderEnv(t *testing.T, name string) (map[string][]byte, *render.Result) {
	t.Helper()
	env, err := environment.Load(repoRoot, name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(filepath.Join(repoRoot, env.Policy))
	if err != nil {
		t.Fatal(err)
	}
	base, err := render.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	files, err := env.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	return files, base
}

func names(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The lab deploys the policy exactly as rendered, labelled with the
// environment.
func TestLabIsThePolicyLabelled(t *testing.T) {
	files, base := renderEnv(t, "lab")
	if got, want := names(files), names(base.Files); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("files:\n%v\nwant the render's:\n%v", got, want)
	}
	from, err := drift.Parse(base.Files)
	if err != nil {
		t.Fatal(err)
	}
	to, err := drift.Parse(files)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range drift.Compare(from, to) {
		if d.Path != `metadata.labels["gpupolicy.dev/environment"]` || d.To != "lab" {
			t.Errorf("the lab overlay changes %s %s: %q → %q", d.Object(), d.Path, d.From, d.To)
		}
	}
	for name, b := range files {
		if !bytes.HasPrefix(b, []byte(environment.Header("lab"))) {
			t.Errorf("%s does not start with the header", name)
		}
	}
	// Deterministic, byte for byte.
	again, _ := renderEnv(t, "lab")
	for name := range files {
		if !bytes.Equal(files[name], again[name]) {
			t.Errorf("%s differs between two renders", name)
		}
	}
}

// The local cluster gets a stand-in for the model store and nothing that
// changes admission.
func TestLocalAddsTheModelStoreOnly(t *testing.T) {
	files, base := renderEnv(t, "local")
	from, _ := drift.Parse(base.Files)
	to, err := drift.Parse(files)
	if err != nil {
		t.Fatal(err)
	}
	var added []string
	for _, d := range drift.Compare(from, to) {
		switch d.Change {
		case drift.Added:
			added = append(added, d.Object())
		case drift.Changed:
			if !strings.HasPrefix(d.Path, "metadata.labels") {
				t.Errorf("the local overlay changes %s %s", d.Object(), d.Path)
			}
		default:
			t.Errorf("the local overlay removes %s", d.Object())
		}
	}
	want := "PersistentVolume/hf-cache-local PersistentVolumeClaim/experiments/hf-cache"
	if strings.Join(added, " ") != want {
		t.Errorf("added %v, want %s", added, want)
	}
	// The claim is the one the template mounts.
	wt := string(files["workflowtemplate_experiments_gpu-step.yaml"])
	if !strings.Contains(wt, "claimName: hf-cache") {
		t.Errorf("gpu-step does not mount claim hf-cache any more; update environments/local/model-store.yaml:\n%s", wt)
	}
}

func TestBuildFromFiles(t *testing.T) {
	env, err := environment.FromFiles("test", map[string][]byte{
		"environment.yaml":   []byte("policy: policies/lab\npin: \"\"\n"),
		"kustomization.yaml": []byte("resources: [base]\nnamePrefix: t-\n"),
	}, "environments/test")
	if err != nil {
		t.Fatal(err)
	}
	base := map[string][]byte{
		"configmap_experiments_gpu-semaphore.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gpu-semaphore\n  namespace: experiments\ndata:\n  main: \"4\"\n"),
	}
	out, err := env.Build(base)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(out), " "); got != "configmap_experiments_t-gpu-semaphore.yaml kustomization.yaml" {
		t.Errorf("files: %s", got)
	}
	if k := string(out["kustomization.yaml"]); !strings.Contains(k, "- configmap_experiments_t-gpu-semaphore.yaml") {
		t.Errorf("kustomization.yaml:\n%s", k)
	}
}

func TestSettingsErrors(t *testing.T) {
	for _, tc := range []struct{ name, settings, kust, want string }{
		{"no kustomization", "policy: policies/lab\n", "", "kustomization.yaml is missing"},
		{"no policy", "pin: \"\"\n", "resources: [base]\n", "policy: missing"},
		{"typo", "policy: policies/lab\npinn: abc\n", "resources: [base]\n", `unknown field "pinn"`},
		{"short pin", "policy: policies/lab\npin: abc1234\n", "resources: [base]\n", "not a full commit SHA"},
		{"outside", "policy: ../elsewhere\n", "resources: [base]\n", "inside the repository"},
	} {
		files := map[string][]byte{"environment.yaml": []byte(tc.settings)}
		if tc.kust != "" {
			files["kustomization.yaml"] = []byte(tc.kust)
		}
		_, err := environment.FromFiles("x", files, "environments/x")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := environment.Load(repoRoot, "nope"); err == nil || !strings.Contains(err.Error(), "environments: lab, local") {
		t.Errorf("unknown environment: %v", err)
	}
	if _, err := environment.Load(repoRoot, "../x"); err == nil {
		t.Error("a path as an environment name is accepted")
	}
}

func TestSetPin(t *testing.T) {
	sha := strings.Repeat("ab", 20)
	in := "# the lab\npolicy: policies/lab\npin: \"\" # set by gpupolicy pin\ndescription: x\n"
	out, err := environment.SetPin([]byte(in), sha)
	if err != nil {
		t.Fatal(err)
	}
	want := "# the lab\npolicy: policies/lab\npin: \"" + sha + "\" # set by gpupolicy pin\ndescription: x\n"
	if string(out) != want {
		t.Errorf("SetPin:\n%s\nwant:\n%s", out, want)
	}
	out, err = environment.SetPin([]byte("policy: policies/lab"), sha)
	if err != nil || string(out) != "policy: policies/lab\npin: \""+sha+"\"\n" {
		t.Errorf("SetPin without a pin line: %q, %v", out, err)
	}
	if _, err := environment.SetPin([]byte(in), "abc"); err == nil {
		t.Error("a short SHA is accepted")
	}
}

// RenderAt renders an environment from a commit's git tree, diagnostics
// naming the commit.
func TestRenderAtCommit(t *testing.T) {
	r := gittest.Init(t)
	lab, err := environment.Load(repoRoot, "lab")
	if err != nil {
		t.Fatal(err)
	}
	r.WriteFiles("environments/lab", lab.Files)
	for _, f := range []string{"policy.cue", "locks.cue", "priorities.cue", "queues.cue", "services.cue", "templates.cue"} {
		b := readFile(t, filepath.Join(repoRoot, "policies/lab", f))
		r.Write("policies/lab/"+f, b)
	}
	c1 := r.Commit("policy")
	g, err := gitrepo.Open(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	files, source, err := environment.RenderAt(g, c1, "lab", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(source, "policies/lab rendered at "+c1[:7]) {
		t.Errorf("source = %q", source)
	}
	if _, ok := files["workflowtemplate_experiments_gpu-step.yaml"]; !ok {
		t.Errorf("no gpu-step in %v", names(files))
	}

	r.Write("policies/lab/locks.cue", "package lab\nlocks: main: size: 0\n")
	c2 := r.Commit("break the policy")
	_, _, err = environment.RenderAt(g, c2, "lab", nil)
	if err == nil || !strings.Contains(err.Error(), c2[:7]+":policies/lab/locks.cue") {
		t.Errorf("a broken policy at a commit: err = %v, want a position in %s:policies/lab/locks.cue", err, c2[:7])
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := osReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var osReadFile = os.ReadFile

// An overlay that patches a rendered Kueue object into something Kueue's CRD
// rejects fails the build, naming the object and the field: the base's own
// validation does not cover what the overlay changes.
func TestBuildRejectsOverlayTheCRDsReject(t *testing.T) {
	_, res := renderEnv(t, "lab")
	env, err := environment.FromFiles("bad", map[string][]byte{
		"environment.yaml": []byte("policy: policies/lab\npin: \"\"\n"),
		"kustomization.yaml": []byte(`resources: [base]
patches:
- target: {kind: ClusterQueue, name: gpu-general}
  patch: |
    - op: replace
      path: /spec/resourceGroups/0/flavors/0/resources/0/nominalQuota
      value: banana
`),
	}, "environments/bad")
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.Build(res.Files)
	if err == nil {
		t.Fatal("the overlay's nominalQuota: banana was accepted")
	}
	for _, want := range []string{"environment bad: the overlay", "ClusterQueue", "gpu-general", "nominalQuota"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
