package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render"
)

// renderLabDir is the lab policy, absolute; GPUPOLICY_TEST_LAB points the
// tests at another copy.
func renderLabDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("GPUPOLICY_TEST_LAB")
	if d == "" {
		d = filepath.Join("..", "..", "policies", "lab")
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func TestRenderLabDefaultOut(t *testing.T) {
	lab := renderLabDir(t)
	t.Chdir(t.TempDir())
	code, stdout, stderr := runCLI(t, "render", lab)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	want := "wrote 26 objects to out/lab: 1 ResourceFlavor, 2 ClusterQueues, 3 LocalQueues, 4 WorkloadPriorityClasses, 3 WorkflowTemplates, 2 ConfigMaps, 1 LimitRange, 4 Namespaces, 3 ValidatingAdmissionPolicies, 3 ValidatingAdmissionPolicyBindings\n"
	if stdout != want {
		t.Errorf("stdout = %q\nwant     %q", stdout, want)
	}
	if stderr != "" {
		t.Errorf("stderr = %q", stderr)
	}
	p, err := policy.Load(lab)
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	got := dirFiles(t, filepath.Join("out", "lab"))
	if len(got) != len(res.Files) {
		t.Errorf("out/lab has %d files, the render %d", len(got), len(res.Files))
	}
	for name, b := range res.Files {
		if !bytes.Equal(got[name], b) {
			t.Errorf("out/lab/%s is not the render's", name)
		}
	}
}

func TestRenderOutReplacesPreviousRender(t *testing.T) {
	lab := renderLabDir(t)
	out := filepath.Join(t.TempDir(), "deploy", "base")
	if code, _, stderr := runCLI(t, "render", lab, "--out", out); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	first := dirFiles(t, out)
	if err := os.WriteFile(filepath.Join(out, "configmap_gone_gone.yaml"), []byte(render.GeneratedPrefix+" from policy \"lab\". DO NOT EDIT.\nstale\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "render", lab, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "wrote 26 objects to "+out+": ") {
		t.Errorf("stdout = %q", stdout)
	}
	second := dirFiles(t, out)
	if _, ok := second["configmap_gone_gone.yaml"]; ok {
		t.Error("the stale file survived the render")
	}
	if len(first) != len(second) {
		t.Fatalf("%d files, then %d", len(first), len(second))
	}
	for name, b := range first {
		if !bytes.Equal(second[name], b) {
			t.Errorf("%s differs between two renders", name)
		}
	}
}

// A policy that Kueue's CRD rejects exits 2 with the policy position, and
// leaves the previous render as it was.
func TestRenderCRDFailure(t *testing.T) {
	lab := renderLabDir(t)
	dir := t.TempDir()
	policyDir := filepath.Join(dir, "policy")
	if err := os.MkdirAll(policyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(lab)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".cue") {
			b, err := os.ReadFile(filepath.Join(lab, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(policyDir, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Nine nodeLabels on the card: the schema and vet allow any number,
	// Kueue's ResourceFlavor at most eight.
	extra := `package lab

cards: "rtx-5060-ti": nodeLabels: {
	"lab.example/a": "1", "lab.example/b": "2", "lab.example/c": "3", "lab.example/d": "4"
	"lab.example/e": "5", "lab.example/f": "6", "lab.example/g": "7", "lab.example/h": "8"
}
`
	if err := os.WriteFile(filepath.Join(policyDir, "extra.cue"), []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "previous.yaml"), []byte("previous\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	code, stdout, stderr := runCLI(t, "render", "policy", "--out", "out")
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, stdout, stderr)
	}
	want := "policy/extra.cue:3:8: crd: ResourceFlavor rtx-5060-ti fails CRD resourceflavors.kueue.x-k8s.io/v1beta2: spec.nodeLabels: Too many: 9: must have at most 8 items"
	if !strings.Contains(stderr, want+"\n1 problem(s)") {
		t.Errorf("stderr lacks\n%s\ngot\n%s", want, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout = %q", stdout)
	}
	if got := dirFiles(t, "out"); len(got) != 1 || string(got["previous.yaml"]) != "previous\n" {
		t.Errorf("the previous render changed: %v", got)
	}
}

func TestRenderInputErrors(t *testing.T) {
	dir := t.TempDir()
	notRender := filepath.Join(dir, "src")
	if err := os.MkdirAll(notRender, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(notRender, "policy.cue"), []byte("package lab\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]string{
		"no such policy":      {"render", filepath.Join(dir, "nope")},
		"two policies":        {"render", "a", "b"},
		"unknown flag":        {"render", "--output", "x"},
		"out is not a render": {"render", renderLabDir(t), "--out", notRender},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			if code, _, stderr := runCLI(t, args...); code != 2 {
				t.Errorf("exit %d, want 2\n%s", code, stderr)
			}
		})
	}
	if got := dirFiles(t, notRender); len(got) != 1 || got["policy.cue"] == nil {
		t.Errorf("the refused --out changed: %v", got)
	}
}

func TestRenderHelp(t *testing.T) {
	code, stdout, _ := runCLI(t, "render", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"gpupolicy render policies/lab --out", "kustomization.yaml", "CEL", "Exit 0 when written, 2"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}
