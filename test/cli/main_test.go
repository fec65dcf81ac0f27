// Package cli runs the gpupolicy binary, built as a user builds it (make
// build's flags), against the local lab cluster.
package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
)

// gpupolicyBin is the binary TestMain builds; repoRoot its checkout.
var gpupolicyBin, repoRoot string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gpupolicy-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if repoRoot, err = cluster.RepoRoot(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		gpupolicyBin = filepath.Join(dir, "gpupolicy")
		// The flags of make build: NVML linked, with the lazy binding it
		// needs, and no kustomize Go-plugin loader (Makefile's GO_TAGS).
		build := exec.Command("go", "build", "-tags", "nvml,kustomize_disable_go_plugin_support", "-ldflags=-extldflags=-Wl,-z,lazy", "-o", gpupolicyBin, "./cmd/gpupolicy")
		build.Dir = repoRoot
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building gpupolicy: %v\n%s", err, out)
			return 1
		}
		return clustertest.Main(m)
	}()
	os.Exit(code)
}

// gpupolicy runs the binary in the repository root and returns its exit
// code, stdout and stderr.
func gpupolicy(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(gpupolicyBin, args...)
	cmd.Dir = repoRoot
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("running gpupolicy %v: %v", args, err)
		}
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}
