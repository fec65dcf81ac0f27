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

// Shared returns the package's cluster, starting it on first use. It skips
// the test when the binaries are not built (make cluster-build) or with
// -short.
func Shared(t testing.TB) *cluster.Cluster {
	t.Helper()
	if err := cluster.Available(); err != nil {
		t.Skip(err)
	}
	if testing.Short() {
		t.Skip("-short: skipping tests that start the lab cluster")
	}
	once.Do(func() {
		shared, sharedErr = cluster.Start(context.Background(), cluster.Options{Logf: log.Printf})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
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
