package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// BuildOptions controls Build.
type BuildOptions struct {
	// Dir is the cache directory; default BinDir().
	Dir string
	// Out receives progress lines and the go command's output; nil means
	// os.Stderr.
	Out io.Writer
	// Force rebuilds components whose stamp is already current.
	Force bool
}

// Build builds every lab-cluster component that is missing from the cache
// directory or carries a stale version stamp, one go command at a time:
// kube-apiserver, kube-controller-manager and kube-scheduler (one go build
// from hack/cluster/kube), etcd (hack/cluster/etcd), kwok and kueue (go
// install of the pinned version), Argo's workflow-controller
// (hack/cluster/argo), and the Kueue and Argo manifests copied from the Go
// module cache. The wrapper modules are found in the repository checkout.
func Build(ctx context.Context, opts BuildOptions) error {
	b := &builder{dir: opts.Dir, out: opts.Out}
	if b.dir == "" {
		b.dir = BinDir()
	}
	if b.dir == "" {
		return errors.New("cluster: cannot locate the cache directory; set " + EnvBinDir)
	}
	if b.out == nil {
		b.out = os.Stderr
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	b.root = root
	b.goBin, err = findGo()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(b.dir, stampsDir), 0o755); err != nil {
		return err
	}
	start := time.Now()
	built := 0
	for _, c := range components() {
		if !opts.Force {
			if ok, _ := c.upToDate(b.dir); ok {
				fmt.Fprintf(b.out, "lab-cluster: %-10s up to date (%s)\n", c.name, c.stamp)
				continue
			}
		}
		_ = os.Remove(c.stampPath(b.dir))
		fmt.Fprintf(b.out, "lab-cluster: building %s (%s)%s\n", c.name, c.stamp, c.note)
		t0 := time.Now()
		if err := c.build(ctx, b); err != nil {
			return fmt.Errorf("cluster: building %s: %w", c.name, err)
		}
		for _, f := range c.files {
			if _, err := os.Stat(filepath.Join(b.dir, f)); err != nil {
				return fmt.Errorf("cluster: building %s: expected %s: %w", c.name, f, err)
			}
		}
		if err := os.WriteFile(c.stampPath(b.dir), []byte(c.stamp+"\n"), 0o644); err != nil {
			return err
		}
		built++
		fmt.Fprintf(b.out, "lab-cluster: built %s in %s\n", c.name, time.Since(t0).Round(time.Second))
	}
	fmt.Fprintf(b.out, "lab-cluster: %d component(s) built in %s; cache %s\n", built, time.Since(start).Round(time.Second), b.dir)
	return nil
}

type builder struct {
	dir, root, goBin string
	out              io.Writer
}

type component struct {
	name  string
	stamp string   // expected content of stamps/<name>
	files []string // paths relative to the cache dir that must exist
	note  string
	build func(ctx context.Context, b *builder) error
}

func (c component) stampPath(dir string) string { return filepath.Join(dir, stampsDir, c.name) }

func (c component) upToDate(dir string) (bool, string) {
	for _, f := range c.files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false, "missing " + f
		}
	}
	got, err := os.ReadFile(c.stampPath(dir))
	if err != nil {
		return false, "no version stamp for " + c.name
	}
	if strings.TrimSpace(string(got)) != c.stamp {
		return false, fmt.Sprintf("%s is %q, want %q", c.name, strings.TrimSpace(string(got)), c.stamp)
	}
	return true, ""
}

const (
	kubeLDFlags = "-X k8s.io/component-base/version.gitVersion=" + KubernetesVersion +
		" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
	kwokLDFlags  = "-X sigs.k8s.io/kwok/pkg/consts.Version=" + KwokVersion
	kueueLDFlags = "-X sigs.k8s.io/kueue/pkg/version.GitVersion=" + KueueVersion
	argoLDFlags  = "-X github.com/argoproj/argo-workflows/v3.version=" + ArgoVersion
	// manifestsLayout changes whenever the copied manifest layout changes.
	manifestsLayout = "2"
)

func components() []component {
	return []component{
		{
			name:  "kubernetes",
			stamp: "k8s.io/kubernetes@" + KubernetesVersion + " ldflags=" + kubeLDFlags,
			files: []string{binAPIServer, binKCM, binScheduler},
			note:  "; the longest: about 13 minutes cold on 2 idle cores, 1 minute with a warm Go build cache",
			build: func(ctx context.Context, b *builder) error {
				wd := filepath.Join(b.root, "hack", "cluster", "kube")
				if err := checkWrapper(wd, "k8s.io/kubernetes", KubernetesVersion); err != nil {
					return err
				}
				return b.goCmd(ctx, wd, nil, "build", "-o", b.dir+string(filepath.Separator), "-ldflags", kubeLDFlags,
					"k8s.io/kubernetes/cmd/kube-apiserver",
					"k8s.io/kubernetes/cmd/kube-controller-manager",
					"k8s.io/kubernetes/cmd/kube-scheduler")
			},
		},
		{
			name:  "etcd",
			stamp: "go.etcd.io/etcd/server/v3@" + EtcdVersion,
			files: []string{binEtcd},
			note:  "; a few minutes cold",
			build: func(ctx context.Context, b *builder) error {
				wd := filepath.Join(b.root, "hack", "cluster", "etcd")
				if err := checkWrapper(wd, "go.etcd.io/etcd/server/v3", EtcdVersion); err != nil {
					return err
				}
				return b.goCmd(ctx, wd, nil, "build", "-o", filepath.Join(b.dir, binEtcd), ".")
			},
		},
		{
			name:  "kwok",
			stamp: "sigs.k8s.io/kwok@" + KwokVersion + " ldflags=" + kwokLDFlags,
			files: []string{binKwok},
			note:  "; about 6 minutes cold",
			build: func(ctx context.Context, b *builder) error {
				return b.goCmd(ctx, os.TempDir(), []string{"GOBIN=" + b.dir}, "install", "-ldflags", kwokLDFlags,
					"sigs.k8s.io/kwok/cmd/kwok@"+KwokVersion)
			},
		},
		{
			name:  "kueue",
			stamp: "sigs.k8s.io/kueue@" + KueueVersion + " ldflags=" + kueueLDFlags,
			files: []string{binKueue},
			note:  "; about 5 minutes cold",
			build: func(ctx context.Context, b *builder) error {
				return b.goCmd(ctx, os.TempDir(), []string{"GOBIN=" + b.dir}, "install", "-ldflags", kueueLDFlags,
					"sigs.k8s.io/kueue/cmd/kueue@"+KueueVersion)
			},
		},
		{
			name:  "argo",
			stamp: "github.com/argoproj/argo-workflows/v3@" + ArgoVersion + " ldflags=" + argoLDFlags,
			files: []string{binArgo},
			note:  "; about 3 minutes cold",
			build: func(ctx context.Context, b *builder) error {
				wd := filepath.Join(b.root, "hack", "cluster", "argo")
				if err := checkWrapper(wd, "github.com/argoproj/argo-workflows/v3", ArgoVersion); err != nil {
					return err
				}
				return b.goCmd(ctx, wd, nil, "build", "-o", filepath.Join(b.dir, binArgo), "-ldflags", argoLDFlags,
					"github.com/argoproj/argo-workflows/v3/cmd/workflow-controller")
			},
		},
		{
			name:  "manifests",
			stamp: "sigs.k8s.io/kueue@" + KueueVersion + " github.com/argoproj/argo-workflows/v3@" + ArgoVersion + " layout=" + manifestsLayout,
			files: []string{
				filepath.Join(manifestsDir, "kueue", "crds"),
				filepath.Join(manifestsDir, "kueue", "crd-conversion"),
				filepath.Join(manifestsDir, "kueue", "webhooks.yaml"),
				filepath.Join(manifestsDir, "argo", "crds", "minimal"),
				filepath.Join(manifestsDir, "argo", "crds", "full"),
			},
			build: func(ctx context.Context, b *builder) error { return b.copyManifests(ctx) },
		},
	}
}

// copyManifests copies Kueue's CRDs, CRD conversion patches and webhook
// configurations and Argo's CRDs from the Go module cache.
func (b *builder) copyManifests(ctx context.Context) error {
	kueueDir, err := b.moduleDir(ctx, "sigs.k8s.io/kueue", KueueVersion)
	if err != nil {
		return err
	}
	argoDir, err := b.moduleDir(ctx, "github.com/argoproj/argo-workflows/v3", ArgoVersion)
	if err != nil {
		return err
	}
	dst := filepath.Join(b.dir, manifestsDir)
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	crdDir := filepath.Join(kueueDir, "config", "components", "crd")
	if err := copyYAMLs(filepath.Join(crdDir, "bases"), filepath.Join(dst, "kueue", "crds"), nil); err != nil {
		return err
	}
	// The conversion-webhook patches that Kueue's kustomization enables.
	enabled, err := enabledConversionPatches(filepath.Join(crdDir, "kustomization.yaml"))
	if err != nil {
		return err
	}
	if err := copyYAMLs(filepath.Join(crdDir, "patches"), filepath.Join(dst, "kueue", "crd-conversion"), enabled); err != nil {
		return err
	}
	if err := copyFile(filepath.Join(kueueDir, "config", "components", "webhook", "manifests.yaml"), filepath.Join(dst, "kueue", "webhooks.yaml")); err != nil {
		return err
	}
	for _, flavour := range []string{"minimal", "full"} {
		if err := copyYAMLs(filepath.Join(argoDir, "manifests", "base", "crds", flavour), filepath.Join(dst, "argo", "crds", flavour), nil); err != nil {
			return err
		}
	}
	return nil
}

func enabledConversionPatches(kustomization string) (map[string]bool, error) {
	data, err := os.ReadFile(kustomization)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "- path: patches/"); ok && strings.HasPrefix(rest, "webhook_in_") {
			out[rest] = true
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no conversion webhook patches enabled in %s", kustomization)
	}
	return out, nil
}

func copyYAMLs(src, dst string, only map[string]bool) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".yaml") || name == "kustomization.yaml" {
			continue
		}
		if only != nil && !only[name] {
			continue
		}
		if err := copyFile(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no manifests found in %s", src)
	}
	return nil
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

func (b *builder) moduleDir(ctx context.Context, mod, version string) (string, error) {
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, b.goBin, "mod", "download", "-json", mod+"@"+version)
	cmd.Dir = os.TempDir()
	cmd.Env = goEnv(nil)
	cmd.Stdout = &stdout
	cmd.Stderr = b.out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", mod, version, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(stdout.Bytes(), &info); err != nil {
		return "", err
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", mod, version, info.Error)
	}
	return info.Dir, nil
}

func (b *builder) goCmd(ctx context.Context, dir string, extraEnv []string, args ...string) error {
	cmd := exec.CommandContext(ctx, b.goBin, args...)
	cmd.Dir = dir
	cmd.Env = goEnv(extraEnv)
	cmd.Stdout = b.out
	cmd.Stderr = b.out
	fmt.Fprintf(b.out, "lab-cluster: (cd %s && go %s)\n", dir, strings.Join(args, " "))
	return cmd.Run()
}

// goEnv is the environment for the go command: the wrapper modules are built
// on their own (GOWORK=off), with the local toolchain, and without a -mod
// flag that go install pkg@version rejects.
func goEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "GOWORK="), strings.HasPrefix(kv, "GOBIN="):
			continue
		case strings.HasPrefix(kv, "GOFLAGS="):
			var keep []string
			for _, f := range strings.Fields(strings.TrimPrefix(kv, "GOFLAGS=")) {
				if !strings.HasPrefix(f, "-mod=") {
					keep = append(keep, f)
				}
			}
			kv = "GOFLAGS=" + strings.Join(keep, " ")
		}
		env = append(env, kv)
	}
	env = append(env, "GOWORK=off")
	if os.Getenv("GOTOOLCHAIN") == "" {
		env = append(env, "GOTOOLCHAIN=local")
	}
	return append(env, extra...)
}

func findGo() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	for _, p := range []string{filepath.Join(os.Getenv("GOROOT"), "bin", "go"), "/usr/local/go/bin/go"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("cluster: the go command is not on PATH")
}

// checkWrapper verifies that the wrapper module in dir requires mod at
// version, so the version constants and the committed go.mod agree.
func checkWrapper(dir, mod, version string) error {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	var found []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == mod {
			found = append(found, f[1])
		}
	}
	sort.Strings(found)
	for _, v := range found {
		if v == version {
			return nil
		}
	}
	return fmt.Errorf("%s/go.mod requires %s %v, want %s (update the wrapper or the version constant)", dir, mod, found, version)
}
