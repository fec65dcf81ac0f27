package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Versions of the components the lab cluster is built from. The wrapper
// modules under hack/cluster/ pin the same versions; Build checks that they
// agree.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.7.3"
	KwokVersion       = "v0.8.0"
	KueueVersion      = "v0.17.0"
	ArgoVersion       = "v3.7.3"
)

// EnvBinDir names the environment variable that overrides where the built
// binaries and manifests are cached (default: <repo>/bin/cluster).
const EnvBinDir = "GPUPOLICY_CLUSTER_BIN"

const modulePath = "github.com/gpupolicy/gpupolicy"

// Binary names inside the cache directory.
const (
	binAPIServer  = "kube-apiserver"
	binKCM        = "kube-controller-manager"
	binScheduler  = "kube-scheduler"
	binEtcd       = "etcd"
	binKwok       = "kwok"
	binKueue      = "kueue"
	binArgo       = "workflow-controller"
	manifestsDir  = "manifests"
	stampsDir     = "stamps"
	defaultRunDir = "run"
)

// RepoRoot returns the root of the gpupolicy checkout: the nearest directory
// above the working directory whose go.mod declares the gpupolicy module,
// falling back to the directory this source file was compiled from.
func RepoRoot() (string, error) {
	if wd, err := os.Getwd(); err == nil {
		if root, ok := findRoot(wd); ok {
			return root, nil
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		if root, ok := findRoot(filepath.Dir(file)); ok {
			return root, nil
		}
	}
	return "", errors.New("cluster: cannot find the gpupolicy repository root (no go.mod declaring " + modulePath + " above the working directory)")
}

func findRoot(dir string) (string, bool) {
	for {
		if isRootModule(filepath.Join(dir, "go.mod")) {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func isRootModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == modulePath
		}
	}
	return false
}

// BinDir returns the directory the lab cluster's binaries and manifests are
// cached in: $GPUPOLICY_CLUSTER_BIN if set, otherwise <repo>/bin/cluster. It
// returns "" when neither can be determined.
func BinDir() string {
	if d := os.Getenv(EnvBinDir); d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
		return d
	}
	root, err := RepoRoot()
	if err != nil {
		return ""
	}
	return filepath.Join(root, "bin", "cluster")
}

// Available reports whether the lab cluster can be started: every binary and
// manifest is present in BinDir() and carries the expected version stamp. The
// error says what is missing and how to build it; tests use it to skip:
//
//	if err := cluster.Available(); err != nil { t.Skip(err) }
func Available() error {
	return availableIn(BinDir())
}

func availableIn(dir string) error {
	if dir == "" {
		return errors.New("lab cluster not available: cannot locate bin/cluster (set " + EnvBinDir + "); build it with `make cluster-build`")
	}
	var missing []string
	for _, c := range components() {
		if ok, why := c.upToDate(dir); !ok {
			missing = append(missing, why)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("lab cluster not built in %s (%s); build it with `make cluster-build` (about 30 minutes cold on 2 cores, about 2 with a warm Go build cache)", dir, strings.Join(missing, "; "))
	}
	return nil
}
