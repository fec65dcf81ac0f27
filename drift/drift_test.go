package drift_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo/gittest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// labRender is the lab environment's render of the repository's policy.
func labRender(t *testing.T) (*environment.Environment, map[string][]byte) {
	t.Helper()
	env, err := environment.Load("..", "lab")
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(filepath.Join("..", env.Policy))
	if err != nil {
		t.Fatal(err)
	}
	files, err := env.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	return env, files
}

// withoutDeclaration returns the render as it was before jobs could declare
// GPU memory: the WorkflowTemplates lack the declaration resource, the
// gpu-memory parameter and the podSpecPatch that carries it.
func withoutDeclaration(t *testing.T, files map[string][]byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, b := range files {
		out[name] = b
		if !strings.HasPrefix(name, "workflowtemplate_") {
			continue
		}
		var o map[string]any
		if err := yaml.Unmarshal(b, &o); err != nil {
			t.Fatal(err)
		}
		spec := o["spec"].(map[string]any)
		if args, ok := spec["arguments"].(map[string]any); ok {
			args["parameters"] = dropNamed(args["parameters"], "gpu-memory")
		}
		for _, st := range spec["templates"].([]any) {
			st := st.(map[string]any)
			delete(st, "podSpecPatch")
			if c, ok := st["container"].(map[string]any); ok {
				res := c["resources"].(map[string]any)
				for _, k := range []string{"requests", "limits"} {
					delete(res[k].(map[string]any), "gpupolicy.dev/gpu-memory")
				}
			}
			if in, ok := st["inputs"].(map[string]any); ok {
				in["parameters"] = dropNamed(in["parameters"], "gpu-memory")
			}
		}
		nb, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = nb
	}
	return out
}

func dropNamed(v any, name string) []any {
	var out []any
	items, _ := v.([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && m["name"] == name {
			continue
		}
		out = append(out, it)
	}
	return out
}

// replay builds the write-up's history: commit 1 deploys templates without
// the GPU-memory declaration, the pin moves to commit 1, commit 3 renders
// the declaration. It returns the repository and the three hashes.
func replay(t *testing.T) (*gittest.Repo, *environment.Environment, [3]string) {
	env, current := labRender(t)
	r := gittest.Init(t)
	r.WriteFiles("environments/lab", env.Files)
	r.WriteFiles("deploy/lab", withoutDeclaration(t, current))
	c1 := r.Commit("deploy/lab: render lab (templates before the GPU-memory declaration)")
	settings, err := environment.SetPin(env.Files["environment.yaml"], c1)
	if err != nil {
		t.Fatal(err)
	}
	r.Write("environments/lab/environment.yaml", string(settings))
	c2 := r.Commit("environments/lab: pin lab")
	r.WriteFiles("deploy/lab", current)
	c3 := r.Commit("deploy/lab: let jobs declare their GPU memory")
	return r, env, [3]string{c1, c2, c3}
}

func gitDrift(t *testing.T, r *gittest.Repo, pin string) *drift.Report {
	t.Helper()
	g, err := gitrepo.Open(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := drift.Git(context.Background(), drift.Options{Repo: g, Env: "lab", Pin: pin, PolicyDir: "policies/lab", EnvDir: "environments/lab"})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// The stale pin of the write-up: every difference is the declaration, its
// consequence is that every job counts as 1,024 MiB, it came with commit 3,
// and the pin is one render-changing commit behind.
func TestStalePinDropsDeclarations(t *testing.T) {
	r, _, c := replay(t)
	rep := gitDrift(t, r, c[0])
	if !rep.Drifted() {
		t.Fatal("no drift")
	}
	if rep.BehindRender != 1 || rep.Behind != 2 || !rep.PinIsAncestor {
		t.Errorf("behind %d (render %d), ancestor %v; want 2 (1), true", rep.Behind, rep.BehindRender, rep.PinIsAncestor)
	}
	want := `spec.templates[gpu-step].container.resources.requests["gpupolicy.dev/gpu-memory"]`
	var found bool
	for _, d := range rep.Differences {
		if d.Kind != "WorkflowTemplate" {
			t.Errorf("unexpected difference %s %s", d.Object(), d.Path)
		}
		if d.Introduced == nil || d.Introduced.Hash != c[2] {
			t.Errorf("%s %s introduced by %v, want %s", d.Object(), d.Path, d.Introduced, c[2][:7])
		}
		if d.Name == "gpu-step" && d.Path == want {
			found = true
			if d.From != "" || d.To != "1Gi" {
				t.Errorf("%s: pin %q HEAD %q, want absent and 1Gi", d.Path, d.From, d.To)
			}
			for _, s := range []string{"declare no GPU memory", "LimitRange default of experiments, 1,024 MiB, whatever it declares", "12,452 MiB was counted as 1,024 MiB"} {
				if !strings.Contains(d.Consequence, s) {
					t.Errorf("consequence %q lacks %q", d.Consequence, s)
				}
			}
		}
	}
	if !found {
		t.Errorf("no difference at %s in\n%s", want, text(t, rep))
	}
	out := text(t, rep)
	for _, s := range []string{"the pin is 1 commit behind HEAD in what lab deploys (2 commits in all)", "introduced by " + c[2][:7], "(absent)"} {
		if !strings.Contains(out, s) {
			t.Errorf("text report lacks %q:\n%s", s, out)
		}
	}
	var md bytes.Buffer
	if err := rep.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| WorkflowTemplate/experiments/gpu-step | `"+strings.ReplaceAll(want, "|", `\|`)+"` | _absent_ | `1Gi` | `"+c[2][:7]) {
		t.Errorf("markdown lacks the declaration row:\n%s", md.String())
	}
	var js bytes.Buffer
	if err := rep.JSON(&js); err != nil {
		t.Fatal(err)
	}
	var back drift.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Differences) != len(rep.Differences) {
		t.Errorf("JSON does not round-trip: %v", err)
	}
}

// Pinning HEAD clears the drift.
func TestPinHeadClearsDrift(t *testing.T) {
	r, _, c := replay(t)
	rep := gitDrift(t, r, c[2])
	if rep.Drifted() {
		t.Errorf("drift at HEAD:\n%s", text(t, rep))
	}
}

// A commit without deploy/lab is rendered from its own policy.
func TestRenderFallback(t *testing.T) {
	env, _ := labRender(t)
	r := gittest.Init(t)
	r.WriteFiles("environments/lab", env.Files)
	for f, b := range seriesLab(t, "1") {
		r.Write("policies/lab/"+f, b)
	}
	c1 := r.Commit("policy: one job at a time")
	r.WriteFiles("deploy/lab", seriesRender(t, env, "4"))
	c2 := r.Commit("deploy/lab: render with the main lock at 4")
	g, _ := gitrepo.Open(r.Dir)
	rep, err := drift.Git(context.Background(), drift.Options{
		Repo: g, Env: "lab", Pin: c1, PolicyDir: "policies/lab", EnvDir: "environments/lab",
		RenderAt: func(commit string) (map[string][]byte, string, error) {
			return environment.RenderAt(g, commit, "lab", env)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Pin.Source, "policies/lab rendered at "+c1[:7]) || rep.Head.Source != "deploy/lab at "+c2[:7] {
		t.Errorf("sources: pin %q, HEAD %q", rep.Pin.Source, rep.Head.Source)
	}
	var lock *drift.Difference
	for i, d := range rep.Differences {
		if d.Kind == "ConfigMap" && d.Path == "data.main" {
			lock = &rep.Differences[i]
		}
	}
	if lock == nil {
		t.Fatalf("no lock difference:\n%s", text(t, rep))
	}
	if lock.From != "1" || lock.To != "4" || !strings.Contains(lock.Consequence, "still run one at a time") || !strings.Contains(lock.Consequence, "up to 4 run at once") {
		t.Errorf("lock: %q → %q: %s", lock.From, lock.To, lock.Consequence)
	}
	if lock.Introduced == nil || lock.Introduced.Hash != c2 {
		t.Errorf("lock introduced by %v, want %s", lock.Introduced, c2[:7])
	}
}

func TestUnknownPin(t *testing.T) {
	r, _, _ := replay(t)
	g, _ := gitrepo.Open(r.Dir)
	_, err := drift.Git(context.Background(), drift.Options{Repo: g, Env: "lab", Pin: strings.Repeat("0", 40)})
	if !drift.IsUnknownRevision(err) {
		t.Errorf("err = %v, want an unknown revision", err)
	}
}

func text(t *testing.T, r *drift.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.Text(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

var osReadFile = os.ReadFile

// mainLockSize is how cmd/gpupolicy/testdata/lab-series/locks.cue sizes
// the main lock (from the general queue's quota: 4); a test that needs
// another size puts a number in its place.
const mainLockSize = `size: {fromQueue: "gpu-general", state: "on-demand-down"}`

// seriesLab is policies/lab with the locks and template of the write-ups'
// series (cmd/gpupolicy/testdata/lab-series: the cache lock of 1 and the
// main lock, here at size unless size is ""), by file name.
func seriesLab(t *testing.T, size string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range []string{"policy.cue", "locks.cue", "priorities.cue", "queues.cue", "services.cue", "templates.cue"} {
		dir := filepath.Join("..", "policies", "lab")
		if f == "locks.cue" || f == "templates.cue" {
			dir = filepath.Join("..", "cmd", "gpupolicy", "testdata", "lab-series")
		}
		b, err := osReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "locks.cue" && size != "" {
			if !bytes.Contains(b, []byte(mainLockSize)) {
				t.Fatalf("lab-series/locks.cue no longer sizes the main lock with %s", mainLockSize)
			}
			b = bytes.Replace(b, []byte(mainLockSize), []byte("size: "+size), 1)
		}
		out[f] = string(b)
	}
	return out
}

// seriesRender is the environment's render of seriesLab(size).
func seriesRender(t *testing.T, env *environment.Environment, size string) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	for f, b := range seriesLab(t, size) {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := policy.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	files, err := env.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Without committed renders, both sides are rendered from their policy, and
// the blame walks the commits that changed the policy or the overlay.
func TestFallbackBlame(t *testing.T) {
	env, _ := labRender(t)
	r := gittest.Init(t)
	r.WriteFiles("environments/lab", env.Files)
	writeLab := func(size string) {
		for f, b := range seriesLab(t, "") {
			if f == "locks.cue" {
				b = strings.Replace(b, mainLockSize, "size: "+size, 1)
			}
			r.Write("policies/lab/"+f, b)
		}
	}
	writeLab("1")
	c1 := r.Commit("policy: one at a time")
	r.Write("README", "docs\n")
	r.Commit("docs")
	writeLab("4")
	c3 := r.Commit("policy: four at once")
	settings, _ := environment.SetPin(env.Files["environment.yaml"], c1)
	r.Write("environments/lab/environment.yaml", string(settings))
	r.Commit("pin")
	g, _ := gitrepo.Open(r.Dir)
	rep, err := drift.Git(context.Background(), drift.Options{
		Repo: g, Env: "lab", Pin: c1, PolicyDir: "policies/lab", EnvDir: "environments/lab",
		RenderAt: func(commit string) (map[string][]byte, string, error) {
			return environment.RenderAt(g, commit, "lab", env)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Behind != 3 || rep.BehindRender != 1 {
		t.Errorf("behind %d, render %d; want 3, 1", rep.Behind, rep.BehindRender)
	}
	for _, d := range rep.Differences {
		if d.Introduced == nil || d.Introduced.Hash != c3 {
			t.Errorf("%s %s introduced by %v, want %s", d.Object(), d.Path, d.Introduced, c3[:7])
		}
	}
}
