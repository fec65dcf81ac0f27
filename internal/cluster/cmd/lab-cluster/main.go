// Command lab-cluster builds, starts and stops the local lab cluster (see
// cluster/README.md). The Makefile's cluster-build, cluster-up and
// cluster-down targets run it.
//
//	lab-cluster build              build the binaries into bin/cluster (once)
//	lab-cluster up [flags]         build if needed, start, wait until ready, detach
//	lab-cluster down               stop everything and remove the run directory
//	lab-cluster status             say whether a cluster is up
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/cluster"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage: lab-cluster build|up|down|status [flags]

  build    build kube-apiserver, kube-controller-manager, kube-scheduler, etcd,
           kwok, kueue and Argo's workflow-controller into the cache directory
           (%s, or $%s), skipping what is already built
  up       build if needed, start the cluster detached, wait until it is ready,
           and write the admin kubeconfig to <cache>/kubeconfig
  down     stop the cluster started by up; leaves no process, port or directory
  status   print whether a cluster is up

flags for up:
`, cluster.BinDir(), cluster.EnvBinDir)
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	upFlags(fs, &upOptions{})
	fs.PrintDefaults()
}

type upOptions struct {
	basePort     int
	fullArgoCRDs bool
	noBuild      bool
	timeout      time.Duration
}

func upFlags(fs *flag.FlagSet, o *upOptions) {
	fs.IntVar(&o.basePort, "base-port", 16400, "first of the 8 consecutive loopback ports (API server = base+2); 0 picks free ports")
	fs.BoolVar(&o.fullArgoCRDs, "argo-full-crds", false, "install Argo's full CRDs instead of the minimal ones")
	fs.BoolVar(&o.noBuild, "no-build", false, "fail instead of building missing binaries")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long to wait for the cluster to become ready")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "build":
		err = cluster.Build(ctx, cluster.BuildOptions{})
	case "up":
		var o upOptions
		fs := flag.NewFlagSet("up", flag.ExitOnError)
		upFlags(fs, &o)
		_ = fs.Parse(os.Args[2:])
		err = up(ctx, o)
	case "down":
		err = down()
	case "status":
		err = status()
	case "-h", "--help", "help":
		usage()
		return
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab-cluster:", err)
		os.Exit(1)
	}
}

func paths() (binDir, runDir, kubeconfig string, err error) {
	binDir = cluster.BinDir()
	if binDir == "" {
		return "", "", "", errors.New("cannot locate bin/cluster; run from the repository or set " + cluster.EnvBinDir)
	}
	return binDir, filepath.Join(binDir, "run", "lab"), filepath.Join(binDir, "kubeconfig"), nil
}

func up(ctx context.Context, o upOptions) error {
	binDir, runDir, kubeconfig, err := paths()
	if err != nil {
		return err
	}
	if err := cluster.Available(); err != nil {
		if o.noBuild {
			return err
		}
		if err := cluster.Build(ctx, cluster.BuildOptions{}); err != nil {
			return err
		}
	}
	c, err := cluster.Start(ctx, cluster.Options{
		BinDir:       binDir,
		RunDir:       runDir,
		BasePort:     o.basePort,
		Detach:       true,
		ArgoFullCRDs: o.fullArgoCRDs,
		Timeout:      o.timeout,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		},
	})
	if err != nil {
		return err
	}
	data, err := os.ReadFile(c.Kubeconfig())
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		return err
	}
	p := c.Ports()
	fmt.Printf(`lab cluster up in %s
  API server   https://127.0.0.1:%d  (etcd http://127.0.0.1:%d)
  nodes        %s  (KWOK; nvidia.com/gpu from the "device plugin", no declaration until gpupolicy reconcile)
  controllers  kube-controller-manager, kube-scheduler, kueue %s, argo workflow-controller %s
  logs         %s
  kubeconfig   %s

  export KUBECONFIG=%s
  make cluster-down   # stops it
`, c.StartupTime().Round(100*time.Millisecond), p.APIServer, p.EtcdClient, strings.Join(c.NodeNames(), ", "),
		cluster.KueueVersion, cluster.ArgoVersion, filepath.Join(runDir, "logs"), kubeconfig, kubeconfig)
	return nil
}

func down() error {
	binDir, runDir, kubeconfig, err := paths()
	if err != nil {
		return err
	}
	_ = os.Remove(kubeconfig)
	if _, err := os.Stat(runDir); os.IsNotExist(err) {
		fmt.Println("lab cluster: not running")
		return nil
	}
	if err := cluster.StopRunDir(runDir); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(binDir, "run")) // only if empty
	fmt.Println("lab cluster: stopped; no process left, no port bound, run directory removed")
	return nil
}

func status() error {
	_, runDir, kubeconfig, err := paths()
	if err != nil {
		return err
	}
	pids := cluster.RunningPIDs(runDir)
	if len(pids) == 0 {
		fmt.Println("lab cluster: not running")
		return nil
	}
	fmt.Printf("lab cluster: running (%d processes) — export KUBECONFIG=%s\n", len(pids), kubeconfig)
	for name, pid := range pids {
		fmt.Printf("  %-24s pid %d\n", name, pid)
	}
	return nil
}
