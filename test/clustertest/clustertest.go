// Package clustertest shares one lab cluster among the tests of a package:
// Shared starts it on first use (or skips when the binaries are not built),
// Main stops it after the tests and fails the run if anything is left
// behind (a process, the run directory).
//
//	func TestMain(m *testing.M) { os.Exit(clustertest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		c := clustertest.Shared(t)
//		...
//	}
package clustertest

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/cluster"
)

var (
	shared    *cluster.Cluster
	sharedErr error
	once      sync.Once
)

// RequireEnv names the variable that makes every test needing the lab
// cluster fail instead of skip when the cluster cannot be had (binaries not
// built, -short): .ci/run sets it to 1, so CI cannot pass by skipping.
const RequireEnv = "GPUPOLICY_REQUIRE_CLUSTER"

// Required reports whether RequireEnv is set to 1.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Shared returns the package's cluster, starting it on first use. It skips
// the test when the binaries are not built (make cluster-build) or with
// -short, and fails it instead when Required.
func Shared(t testing.TB) *cluster.Cluster {
	t.Helper()
	canStart(t)
	once.Do(func() {
		shared, sharedErr = cluster.Start(context.Background(), cluster.Options{Logf: log.Printf})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// Fresh starts a cluster of the test's own, as make cluster-up leaves it
// (nothing reconciled, no node made ready), for a test that asserts that
// state; it stops the cluster when the test ends. Skips or fails as Shared.
func Fresh(t testing.TB) *cluster.Cluster {
	t.Helper()
	canStart(t)
	c, err := cluster.Start(context.Background(), cluster.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// canStart skips the test when the cluster cannot be had (binaries not
// built, -short), or fails it when Required.
func canStart(t testing.TB) {
	t.Helper()
	if err := cluster.Available(); err != nil {
		if Required() {
			t.Fatalf("%s=1 but the lab cluster is not built: %v", RequireEnv, err)
		}
		t.Skip(err)
	}
	if testing.Short() {
		if Required() {
			t.Fatalf("%s=1: -short would skip the tests that need the lab cluster", RequireEnv)
		}
		t.Skip("-short: skipping tests that start the lab cluster")
	}
}

// Main runs the tests, then stops the shared cluster and checks that no
// process and no run directory is left. It returns the exit code.
func Main(m *testing.M) int {
	code := m.Run()
	if shared == nil {
		return code
	}
	runDir := shared.RunDir()
	if err := shared.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the lab cluster:", err)
		return 1
	}
	if pids := cluster.RunningPIDs(runDir); len(pids) > 0 {
		fmt.Fprintln(os.Stderr, "processes left after Stop:", pids)
		return 1
	}
	if _, err := os.Stat(runDir); !os.IsNotExist(err) {
		fmt.Fprintln(os.Stderr, "run directory left after Stop:", runDir)
		return 1
	}
	return code
}
