// Package cluster starts and stops a real local "lab cluster" for tests and
// for `make cluster-up`: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler built from k8s.io/kubernetes, one KWOK-simulated GPU node,
// the real Kueue controller with its CRDs and webhooks, and the real Argo
// Workflows controller with its CRDs. Everything listens on 127.0.0.1 and
// keeps its state in one run directory that Stop removes.
//
// The binaries are built once into bin/cluster/ by Build (`make
// cluster-build`); Available reports whether they are there, so tests can
// skip with a clear message when they are not:
//
//	func TestSomething(t *testing.T) {
//		if err := cluster.Available(); err != nil {
//			t.Skip(err)
//		}
//		c, err := cluster.Start(ctx, cluster.Options{Logf: t.Logf})
//		...
//		t.Cleanup(func() { _ = c.Stop() })
//	}
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// Names and resources of the simulated lab.
const (
	// DefaultNodeName is the fake GPU node KWOK manages.
	DefaultNodeName = "gpu-node-0"
	// SecondNodeName is a second GPU node, with another card model (an
	// NVIDIA L4), so that multi-node and multi-card policies are exercised.
	SecondNodeName = "gpu-node-1"
	// ResourceGPU is one time-slicing share of the card
	// (policy.ResourceShares, as the device plugin advertises it).
	ResourceGPU corev1.ResourceName = policy.ResourceShares
	// ResourceGPUMemory is the GPU-memory declaration extended resource
	// (render's contract.DefaultDeclarationResource). No node advertises it
	// when the cluster starts, as on a real cluster: gpupolicy reconcile's
	// node readiness makes the policy's nodes advertise it.
	ResourceGPUMemory corev1.ResourceName = contract.DefaultDeclarationResource
	// AnnotationRunSeconds on a pod makes the simulated node run it for that
	// many seconds (a number, or a Go duration such as "1m30s") before it
	// exits.
	AnnotationRunSeconds = "gpupolicy.dev/run-seconds"
	// AnnotationExitCode sets the simulated exit code of a timed pod
	// (default "0"; anything else makes the pod Failed).
	AnnotationExitCode = "gpupolicy.dev/exit-code"

	// KueueNamespace and ArgoNamespace are where the controllers run.
	KueueNamespace = "kueue-system"
	ArgoNamespace  = "argo"

	kwokNodeAnnotation = "kwok.x-k8s.io/node"
)

// Options configures Start. The zero value is a cluster on free ports in a
// fresh temporary directory, with the default GPU node.
type Options struct {
	// BinDir holds the built binaries and manifests; default BinDir().
	BinDir string
	// RunDir holds the cluster's state: certificates, kubeconfigs, etcd
	// data, logs and pid files. Empty means a new temporary directory. Stop
	// removes it unless KeepRunDir is set.
	RunDir string
	// KeepRunDir keeps RunDir after Stop, to read the component logs.
	KeepRunDir bool
	// BasePort, when non-zero, fixes the ports: BasePort+0 … BasePort+7 (see
	// Ports). Zero picks free ports.
	BasePort int
	// Detach lets the processes outlive the calling process (no
	// parent-death signal); `lab-cluster up` uses it. Without it the
	// components are killed if the caller dies without calling Stop.
	Detach bool
	// Node is the simulated GPU node; zero fields take DefaultNode's values.
	Node NodeOptions
	// MoreNodes are further simulated GPU nodes; nil means SecondNode(),
	// an empty non-nil slice none.
	MoreNodes []NodeOptions
	// ArgoFullCRDs installs Argo's full CRDs (complete OpenAPI schemas, as
	// with `kubectl apply --server-side` of manifests/base/crds/full)
	// instead of the minimal ones Argo's quick-start install uses.
	ArgoFullCRDs bool
	// Timeout bounds Start; default 3 minutes.
	Timeout time.Duration
	// Logf receives progress messages (t.Logf in tests); nil discards them.
	Logf func(format string, args ...any)
}

// NodeOptions describes the fake GPU node.
type NodeOptions struct {
	Name     string
	Capacity corev1.ResourceList
	Labels   map[string]string
}

// DefaultNode is the lab's GPU node as a real one starts: one RTX 5060 Ti
// time-sliced into 8 shares of nvidia.com/gpu (what the NVIDIA device
// plugin advertises), GPU feature discovery's labels, and nothing else: no
// declaration resource, no device-plugin config label.
func DefaultNode() NodeOptions {
	return NodeOptions{
		Name: DefaultNodeName,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    mustQuantity("16"),
			corev1.ResourceMemory: mustQuantity("64Gi"),
			corev1.ResourcePods:   mustQuantity("110"),
			ResourceGPU:           mustQuantity("8"),
		},
		Labels: map[string]string{
			"nvidia.com/gpu.product":          "NVIDIA-GeForce-RTX-5060-Ti-SHARED", // GFD adds -SHARED on a time-sliced card
			"nvidia.com/gpu.count":            "1",
			"nvidia.com/gpu.replicas":         "8",
			"nvidia.com/gpu.sharing-strategy": "time-slicing",
			"nvidia.com/gpu.memory":           "16311",
		},
	}
}

// SecondNode is a second GPU node as a real one starts, with another card
// model: one NVIDIA L4 (24 GB, 23,034 MiB), time-sliced into 4 shares. The
// lab policy does not select it.
func SecondNode() NodeOptions {
	return NodeOptions{
		Name: SecondNodeName,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    mustQuantity("8"),
			corev1.ResourceMemory: mustQuantity("32Gi"),
			corev1.ResourcePods:   mustQuantity("110"),
			ResourceGPU:           mustQuantity("4"),
		},
		Labels: map[string]string{
			"nvidia.com/gpu.product":          "NVIDIA-L4-SHARED",
			"nvidia.com/gpu.count":            "1",
			"nvidia.com/gpu.replicas":         "4",
			"nvidia.com/gpu.sharing-strategy": "time-slicing",
			"nvidia.com/gpu.memory":           "23034",
		},
	}
}

// Ports are the loopback ports of one cluster. Argo's workflow-controller
// additionally binds its health endpoint to :6060, which it hard-codes.
type Ports struct {
	EtcdClient        int `json:"etcdClient"`
	EtcdPeer          int `json:"etcdPeer"`
	APIServer         int `json:"apiServer"`
	ControllerManager int `json:"controllerManager"`
	Scheduler         int `json:"scheduler"`
	Kwok              int `json:"kwok"`
	KueueWebhook      int `json:"kueueWebhook"`
	KueueHealth       int `json:"kueueHealth"`
}

func (p Ports) list() []int {
	return []int{p.EtcdClient, p.EtcdPeer, p.APIServer, p.ControllerManager, p.Scheduler, p.Kwok, p.KueueWebhook, p.KueueHealth}
}

// Cluster is a running lab cluster.
type Cluster struct {
	opts       Options
	binDir     string
	runDir     string
	ports      Ports
	pki        *pki
	procs      []*process
	kubeconfig string
	restConfig *rest.Config
	client     kubernetes.Interface
	dyn        dynamic.Interface
	mapper     *restmapper.DeferredDiscoveryRESTMapper
	started    time.Duration
	logf       func(string, ...any)

	stopOnce sync.Once
	stopErr  error
}

// state is what a detached cluster leaves in its run directory so that
// another process (`lab-cluster down`) can find and stop it.
type state struct {
	RunDir     string    `json:"runDir"`
	Kubeconfig string    `json:"kubeconfig"`
	Ports      Ports     `json:"ports"`
	Started    time.Time `json:"started"`
	StartupSec float64   `json:"startupSeconds"`
}

const stateFile = "state.json"

// Start builds nothing: it starts a lab cluster from the binaries in
// Options.BinDir and returns once the API server is healthy, the GPU node is
// Ready, Kueue's webhooks answer and Argo's controller leads. On failure it
// stops whatever it started and returns the failing component's log tail.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	t0 := time.Now()
	if opts.BinDir == "" {
		opts.BinDir = BinDir()
	}
	if err := availableIn(opts.BinDir); err != nil {
		return nil, err
	}
	if opts.Timeout == 0 {
		opts.Timeout = 3 * time.Minute
	}
	def := DefaultNode()
	if opts.Node.Name == "" {
		opts.Node.Name = def.Name
	}
	if opts.Node.Capacity == nil {
		opts.Node.Capacity = def.Capacity
	}
	if opts.Node.Labels == nil {
		opts.Node.Labels = def.Labels
	}
	if opts.MoreNodes == nil {
		opts.MoreNodes = []NodeOptions{SecondNode()}
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	runDir := opts.RunDir
	if runDir == "" {
		runDir, err = os.MkdirTemp("", "lab-cluster-")
		if err != nil {
			return nil, err
		}
	} else {
		runDir, err = filepath.Abs(runDir)
		if err != nil {
			return nil, err
		}
		if pids := livePIDs(runDir); len(pids) > 0 {
			return nil, fmt.Errorf("cluster: a lab cluster is already running in %s (pids %v); stop it first (make cluster-down)", runDir, pids)
		}
		if err := os.RemoveAll(runDir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			return nil, err
		}
	}
	c = &Cluster{opts: opts, binDir: opts.BinDir, runDir: runDir, logf: logf}
	defer func() {
		if err != nil {
			if serr := c.Stop(); serr != nil {
				err = fmt.Errorf("%w (and stopping: %v)", err, serr)
			}
			if opts.KeepRunDir {
				err = fmt.Errorf("%w (logs in %s)", err, filepath.Join(runDir, "logs"))
			}
			c = nil
		}
	}()

	if c.ports, err = allocatePorts(opts.BasePort); err != nil {
		return nil, err
	}
	logf("lab-cluster: run dir %s, API server https://127.0.0.1:%d", runDir, c.ports.APIServer)
	if err := c.writePKI(); err != nil {
		return c, err
	}
	if err := c.run(ctx); err != nil {
		return c, err
	}
	c.started = time.Since(t0)
	st := state{RunDir: runDir, Kubeconfig: c.kubeconfig, Ports: c.ports, Started: time.Now(), StartupSec: c.started.Seconds()}
	data, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(filepath.Join(runDir, stateFile), data, 0o644); err != nil {
		return c, err
	}
	logf("lab-cluster: ready in %s", c.started.Round(100*time.Millisecond))
	return c, nil
}

// Kubeconfig returns the path of the admin kubeconfig (client certificate in
// group system:masters).
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// RESTConfig returns a copy of the admin client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Clientset returns an admin typed client.
func (c *Cluster) Clientset() kubernetes.Interface { return c.client }

// Dynamic returns an admin dynamic client.
func (c *Cluster) Dynamic() dynamic.Interface { return c.dyn }

// RESTMapper returns a discovery-backed mapper that refreshes itself when a
// kind is not found (for example right after a CRD is installed).
func (c *Cluster) RESTMapper() meta.RESTMapper { return c.mapper }

// RunDir returns the directory holding the cluster's state and logs.
func (c *Cluster) RunDir() string { return c.runDir }

// Ports returns the cluster's loopback ports.
func (c *Cluster) Ports() Ports { return c.ports }

// NodeName returns the name of the simulated GPU node.
func (c *Cluster) NodeName() string { return c.opts.Node.Name }

// NodeNames returns the names of every simulated GPU node, NodeName first.
func (c *Cluster) NodeNames() []string {
	out := []string{c.opts.Node.Name}
	for _, n := range c.opts.MoreNodes {
		out = append(out, n.Name)
	}
	return out
}

// StartupTime is how long Start took.
func (c *Cluster) StartupTime() time.Duration { return c.started }

// LogPath returns the log file of a component: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok, kueue or workflow-controller.
func (c *Cluster) LogPath(component string) string {
	return filepath.Join(c.runDir, "logs", component+".log")
}

// Stop stops every component (SIGTERM to each process group, SIGKILL after a
// grace period), checks that no process is left and no port is still bound,
// and removes the run directory unless Options.KeepRunDir. It is safe to
// call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.stopErr = stopRun(c.runDir, c.procs, c.ports, !c.opts.KeepRunDir)
		if c.stopErr == nil {
			c.logf("lab-cluster: stopped")
		}
	})
	return c.stopErr
}

// StopRunDir stops a detached cluster (one started by `lab-cluster up` or
// with Options.Detach) from the pid files in its run directory, verifies that
// nothing is left running or listening, and removes the directory.
func StopRunDir(runDir string) error {
	var ports Ports
	if data, err := os.ReadFile(filepath.Join(runDir, stateFile)); err == nil {
		var st state
		if json.Unmarshal(data, &st) == nil {
			ports = st.Ports
		}
	}
	return stopRun(runDir, nil, ports, true)
}

// stopOrder lists components in the order they are stopped: the controllers
// first (together), then the API server, then etcd.
var stopOrder = [][]string{
	{"workflow-controller", "kueue", "kwok", "kube-scheduler", "kube-controller-manager"},
	{"kube-apiserver"},
	{"etcd"},
}

func stopRun(runDir string, procs []*process, ports Ports, removeDir bool) error {
	if runDir == "" {
		return nil
	}
	byName := map[string]*process{}
	for _, p := range procs {
		byName[p.name] = p
	}
	for name, pid := range readPIDs(runDir) {
		if _, ok := byName[name]; !ok {
			byName[name] = &process{name: name, pid: pid}
		}
	}
	var errs []error
	stopped := map[string]bool{}
	stopSet := func(names []string) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, name := range names {
			p, ok := byName[name]
			if !ok {
				continue
			}
			stopped[name] = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := stopGroup(p.pid, p.done, 15*time.Second); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	for _, set := range stopOrder {
		stopSet(set)
	}
	var rest []string
	for name := range byName {
		if !stopped[name] {
			rest = append(rest, name)
		}
	}
	stopSet(rest)
	for _, port := range ports.list() {
		if port == 0 {
			continue
		}
		if !waitFor(func() bool { return portFree(port) }, 5*time.Second) {
			errs = append(errs, fmt.Errorf("port %d is still in use after stopping", port))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cluster: stopping %s: %w", runDir, errors.Join(errs...))
	}
	if removeDir {
		if err := os.RemoveAll(runDir); err != nil {
			return fmt.Errorf("cluster: removing %s: %w", runDir, err)
		}
	}
	return nil
}

// RunningPIDs returns the live component processes of the cluster whose run
// directory is runDir, by component name.
func RunningPIDs(runDir string) map[string]int {
	out := map[string]int{}
	for name, pid := range readPIDs(runDir) {
		if alive(pid) {
			out[name] = pid
		}
	}
	return out
}

func livePIDs(runDir string) []int {
	var out []int
	for _, pid := range readPIDs(runDir) {
		if alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func allocatePorts(base int) (Ports, error) {
	var ports []int
	if base != 0 {
		for i := range 8 {
			p := base + i
			if !portFree(p) {
				return Ports{}, fmt.Errorf("cluster: port %d (base port %d) is in use; is a lab cluster already up (make cluster-down)?", p, base)
			}
			ports = append(ports, p)
		}
	} else {
		var ls []net.Listener
		defer func() {
			for _, l := range ls {
				l.Close()
			}
		}()
		for range 8 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return Ports{}, err
			}
			ls = append(ls, l)
			ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		}
	}
	return Ports{
		EtcdClient: ports[0], EtcdPeer: ports[1], APIServer: ports[2], ControllerManager: ports[3],
		Scheduler: ports[4], Kwok: ports[5], KueueWebhook: ports[6], KueueHealth: ports[7],
	}, nil
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newMapper returns a RESTMapper that re-reads discovery on a miss.
func newMapper(cfg *rest.Config) (*restmapper.DeferredDiscoveryRESTMapper, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), nil
}
