package environment_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/environment"
)

// An overlay that names anything remote (a git repository, a URL) is an
// error naming the kustomization's file and line, raised before kustomize
// runs: no git is run, no clone is left in TMPDIR, no URL is fetched.
func TestBuildRefusesRemote(t *testing.T) {
	// A git that records being run, first on PATH.
	bin := t.TempDir()
	ran := filepath.Join(t.TempDir(), "git-ran")
	fake := "#!/bin/sh\necho \"$@\" >> " + ran + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fetched\n"))
	}))
	defer srv.Close()

	_, base := renderEnv(t, "lab")
	for _, tc := range []struct {
		name, file, kust string
		line             int
		ref              string
	}{
		{"git resource", "kustomization.yaml", "# the lab, plus a remote base\nresources:\n- base\n- github.com/x/y//z?ref=v1\n", 4, "github.com/x/y//z?ref=v1"},
		{"https resource", "kustomization.yaml", "resources: [base, " + srv.URL + "/cm.yaml]\n", 1, srv.URL + "/cm.yaml"},
		{"scp-style component", "kustomization.yaml", "resources: [base]\ncomponents:\n  - git@gitlab.example.com:lab/parts.git//gpu\n", 3, "git@gitlab.example.com:lab/parts.git//gpu"},
		{"file URL", "kustomization.yaml", "resources:\n- base\n- file:///srv/repo.git//x\n", 3, "file:///srv/repo.git//x"},
		{"patch path", "kustomization.yaml", "resources: [base]\npatches:\n- path: " + srv.URL + "/patch.yaml\n  target: {kind: ConfigMap}\n", 3, srv.URL + "/patch.yaml"},
		{"generator file", "kustomization.yaml", "resources: [base]\nconfigMapGenerator:\n- name: x\n  files:\n  - key=" + srv.URL + "/f.txt\n", 5, "key=" + srv.URL + "/f.txt"},
		{"nested kustomization", "extra/kustomization.yaml", "resources:\n\n- GIT::HTTPS://github.com/x/y.git\n", 3, "GIT::HTTPS://github.com/x/y.git"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := buildOverlay(t, base.Files, tc.file, tc.kust)
			if err == nil {
				t.Fatal("the remote overlay was built")
			}
			want := "environments/t/" + tc.file + ":" + strconv.Itoa(tc.line) + ": "
			if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), `"`+tc.ref+`" is remote`) {
				t.Errorf("error = %v\nwant it to start with %q and name %q", err, want, tc.ref)
			}
		})
	}
	if b, err := os.ReadFile(ran); err == nil {
		t.Errorf("git was run: %s", b)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d URL(s) fetched", n)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("TMPDIR holds %v", entries)
	}
}

// Local references, inline patches and values that merely mention a URL
// are not remote.
func TestBuildLocalOverlay(t *testing.T) {
	_, base := renderEnv(t, "lab")
	env, err := environment.FromFiles("t", map[string][]byte{
		"environment.yaml": []byte("policy: policies/lab\npin: \"\"\n"),
		"kustomization.yaml": []byte(`resources: [base, extra]
commonAnnotations:
  docs: https://lab.example/gpu
configMapGenerator:
- name: notes
  namespace: experiments
  files: [readme=notes.txt]
patches:
- path: patch.yaml
`),
		"extra/kustomization.yaml": []byte("resources: [cm.yaml]\n"),
		"extra/cm.yaml":            []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: experiments\ndata:\n  url: https://github.com/x/y\n"),
		"notes.txt":                []byte("see https://example.com\n"),
		"patch.yaml":               []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: experiments\n  annotations:\n    source: git@github.com:x/y\n"),
	}, "environments/t")
	if err != nil {
		t.Fatal(err)
	}
	out, err := env.Build(base.Files)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out["configmap_experiments_extra.yaml"]), "source: git@github.com:x/y") {
		t.Errorf("the local patch was not applied:\n%s", out["configmap_experiments_extra.yaml"])
	}
}

// A path that climbs out of the environment, or an absolute one, is refused
// at its line with the reason; kustomize alone would say "'/etc' doesn't
// exist" about its in-memory file system, with no line.
func TestBuildRefusesOutside(t *testing.T) {
	_, base := renderEnv(t, "lab")
	for _, tc := range []struct {
		name, file, kust string
		line             int
		ref              string
	}{
		{"climbing resource", "kustomization.yaml", "resources:\n- base\n- ../../../etc\n", 3, "../../../etc"},
		{"absolute patch", "kustomization.yaml", "resources: [base]\npatches:\n- path: /etc/passwd\n", 3, "/etc/passwd"},
		{"nested climbing file", "extra/kustomization.yaml", "configMapGenerator:\n- name: x\n  files: [k=../../secret.txt]\n", 3, "k=../../secret.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := buildOverlay(t, base.Files, tc.file, tc.kust)
			want := "environments/t/" + tc.file + ":" + strconv.Itoa(tc.line) + ": "
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), `"`+tc.ref+`" is outside the environment`) {
				t.Errorf("error = %v\nwant it to start with %q and name %q", err, want, tc.ref)
			}
		})
	}
	// ../base from a nested kustomization stays inside: not refused here.
	env, err := environment.FromFiles("t", map[string][]byte{
		"environment.yaml":         []byte("policy: policies/lab\npin: \"\"\n"),
		"kustomization.yaml":       []byte("resources: [extra]\n"),
		"extra/kustomization.yaml": []byte("resources: [../base]\n"),
	}, "environments/t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Build(base.Files); err != nil && strings.Contains(err.Error(), "outside the environment") {
		t.Errorf("../base from extra/ refused: %v", err)
	}
}

// buildOverlay builds an environment "t" over base whose kustomization
// lists base and extra/, with file (one of them) replaced by kust.
func buildOverlay(t *testing.T, base map[string][]byte, file, kust string) error {
	t.Helper()
	files := map[string][]byte{
		"environment.yaml":         []byte("policy: policies/lab\npin: \"\"\n"),
		"kustomization.yaml":       []byte("resources: [base, extra]\n"),
		"extra/kustomization.yaml": []byte("resources: []\n"),
	}
	files[file] = []byte(kust)
	env, err := environment.FromFiles("t", files, "environments/t")
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.Build(base)
	return err
}
