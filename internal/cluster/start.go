package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gpupolicy/gpupolicy/render/contract"
)

//go:embed assets/kwok-stages.yaml
var kwokStages []byte

var (
	gvrCRD        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gvrMutating   = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
	gvrValidating = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
)

// component identities: each gets its own client certificate.
var identities = map[string]struct {
	cn   string
	orgs []string
}{
	"admin":                   {"lab-admin", []string{"system:masters"}},
	"kube-controller-manager": {"system:kube-controller-manager", []string{"system:masters"}},
	"kube-scheduler":          {"system:kube-scheduler", nil},
	"kwok":                    {"kwok-controller", []string{"system:masters"}},
	"kueue":                   {"kueue-controller-manager", []string{"system:masters"}},
	"workflow-controller":     {"argo-workflow-controller", []string{"system:masters"}},
}

func (c *Cluster) path(parts ...string) string {
	return filepath.Join(append([]string{c.runDir}, parts...)...)
}

func (c *Cluster) kubeconfigPath(name string) string {
	return c.path("kubeconfigs", name+".kubeconfig")
}

// writePKI creates the CA, serving certificates, service-account keys and a
// kubeconfig per component.
func (c *Cluster) writePKI() error {
	p, err := newPKI()
	if err != nil {
		return err
	}
	c.pki = p
	caKey, err := p.keyPEM()
	if err != nil {
		return err
	}
	crt, key, err := p.issue(certRequest{
		commonName: "lab-serving",
		server:     true,
		ips:        []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.96.0.1")},
		dnsNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	})
	if err != nil {
		return err
	}
	saKey, saPub, err := serviceAccountKeys()
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"pki/ca.crt":      p.caPEM,
		"pki/ca.key":      caKey,
		"pki/serving.crt": crt,
		"pki/serving.key": key,
		"pki/sa.key":      saKey,
		"pki/sa.pub":      saPub,
		// Kueue's webhook server reads tls.crt/tls.key from its cert dir.
		"kueue/certs/tls.crt": crt,
		"kueue/certs/tls.key": key,
		// Kueue (with internal cert management off) insists on metrics
		// certificates in /etc/kueue/metrics/certs; they are overlaid onto
		// /etc in Kueue's private mount namespace.
		"kueue/etc/upper/kueue/metrics/certs/tls.crt": crt,
		"kueue/etc/upper/kueue/metrics/certs/tls.key": key,
		"kwok/stages.yaml":                            kwokStages,
	}
	for name, data := range files {
		if err := writeFile(c.path(name), data, 0o600); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(c.path("kueue", "etc", "work"), 0o755); err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", c.ports.APIServer)
	for name, id := range identities {
		crt, key, err := p.issue(certRequest{commonName: id.cn, orgs: id.orgs, client: true})
		if err != nil {
			return err
		}
		if err := writeKubeconfig(c.kubeconfigPath(name), server, p.caPEM, id.cn, crt, key); err != nil {
			return err
		}
	}
	c.kubeconfig = c.kubeconfigPath("admin")
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	cfg.Timeout = 30 * time.Second
	c.restConfig = cfg
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	c.mapper, err = newMapper(cfg)
	return err
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, mode)
}

func writeKubeconfig(path, server string, caPEM []byte, user string, certPEM, keyPEM []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["lab"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["lab"] = &clientcmdapi.Context{Cluster: "lab", AuthInfo: user}
	cfg.CurrentContext = "lab"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}

func (c *Cluster) start(name, bin string, args []string, env ...string) (*process, error) {
	p, err := startProcess(c.runDir, name, bin, args, env, c.opts.Detach)
	if p != nil {
		c.procs = append(c.procs, p)
	}
	return p, err
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.binDir, name) }

// run starts the components in dependency order and waits for readiness.
func (c *Cluster) run(ctx context.Context) error {
	core, err := c.startCore(ctx)
	if err != nil {
		return err
	}
	return c.startRest(ctx, core)
}

func loopURL(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }

// startCore starts etcd and kube-apiserver, waits until the API server is
// ready, and starts kube-controller-manager and kube-scheduler.
func (c *Cluster) startCore(ctx context.Context) ([]*process, error) {
	pt := c.ports
	loop := loopURL

	// etcd
	etcd, err := c.start("etcd", c.bin(binEtcd), []string{
		"--name=lab",
		"--data-dir=" + c.path("etcd"),
		"--listen-client-urls=" + loop(pt.EtcdClient),
		"--advertise-client-urls=" + loop(pt.EtcdClient),
		"--listen-peer-urls=" + loop(pt.EtcdPeer),
		"--initial-advertise-peer-urls=" + loop(pt.EtcdPeer),
		"--initial-cluster=lab=" + loop(pt.EtcdPeer),
		"--unsafe-no-fsync",
		"--max-request-bytes=10485760",
		"--log-level=warn",
	})
	if err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx, "etcd healthy", []*process{etcd}, func(ctx context.Context) (bool, error) {
		body, err := httpGet(ctx, http.DefaultClient, loop(pt.EtcdClient)+"/health")
		return err == nil && strings.Contains(body, `"health":"true"`), err
	}); err != nil {
		return nil, err
	}

	// kube-apiserver
	apiserver, err := c.start("kube-apiserver", c.bin(binAPIServer), []string{
		"--etcd-servers=" + loop(pt.EtcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(pt.APIServer),
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + c.path("pki"),
		"--tls-cert-file=" + c.path("pki", "serving.crt"),
		"--tls-private-key-file=" + c.path("pki", "serving.key"),
		"--client-ca-file=" + c.path("pki", "ca.crt"),
		"--service-account-key-file=" + c.path("pki", "sa.pub"),
		"--service-account-signing-key-file=" + c.path("pki", "sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--event-ttl=1h",
	})
	if err != nil {
		return nil, err
	}
	core := []*process{etcd, apiserver}
	if err := c.waitReady(ctx, "kube-apiserver ready", core, func(ctx context.Context) (bool, error) {
		body, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", err
	}); err != nil {
		return nil, err
	}

	// kube-controller-manager and kube-scheduler need nothing but the API.
	kcm, err := c.start("kube-controller-manager", c.bin(binKCM), []string{
		"--kubeconfig=" + c.kubeconfigPath("kube-controller-manager"),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(pt.ControllerManager),
		"--tls-cert-file=" + c.path("pki", "serving.crt"),
		"--tls-private-key-file=" + c.path("pki", "serving.key"),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--root-ca-file=" + c.path("pki", "ca.crt"),
		"--service-account-private-key-file=" + c.path("pki", "sa.key"),
		"--kube-api-qps=100",
		"--kube-api-burst=200",
	})
	if err != nil {
		return nil, err
	}
	scheduler, err := c.start("kube-scheduler", c.bin(binScheduler), []string{
		"--kubeconfig=" + c.kubeconfigPath("kube-scheduler"),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(pt.Scheduler),
		"--tls-cert-file=" + c.path("pki", "serving.crt"),
		"--tls-private-key-file=" + c.path("pki", "serving.key"),
		"--leader-elect=false",
	})
	if err != nil {
		return nil, err
	}
	return append(core, kcm, scheduler), nil
}

// startRest creates the node and the controllers' CRDs and namespaces,
// starts KWOK, Kueue and Argo, and waits until everything is ready.
func (c *Cluster) startRest(ctx context.Context, core []*process) error {
	pt := c.ports

	// Cluster objects the controllers need before they start.
	for _, ns := range []string{KueueNamespace, ArgoNamespace} {
		if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	if err := c.createNode(ctx); err != nil {
		return err
	}
	kwok, err := c.start("kwok", c.bin(binKwok), []string{
		"--kubeconfig=" + c.kubeconfigPath("kwok"),
		"--config=" + c.path("kwok", "stages.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		"--node-lease-duration-seconds=40",
		"--cidr=10.244.0.1/24",
		"--node-ip=127.0.0.1",
		"--node-port=" + strconv.Itoa(pt.Kwok),
		"--server-address=127.0.0.1:" + strconv.Itoa(pt.Kwok),
	})
	if err != nil {
		return err
	}
	crds, err := c.installCRDs(ctx)
	if err != nil {
		return err
	}
	if err := c.waitReady(ctx, fmt.Sprintf("%d CRDs established", len(crds)), core, func(ctx context.Context) (bool, error) {
		return c.crdsEstablished(ctx, crds)
	}); err != nil {
		return err
	}

	// Kueue, in a private mount namespace that overlays its metrics
	// certificates onto /etc.
	if err := writeFile(c.path("kueue", "config.yaml"), []byte(c.kueueConfig()), 0o644); err != nil {
		return err
	}
	kueueBin, kueueArgs, kueueEnv, err := c.kueueCommand()
	if err != nil {
		return err
	}
	kueue, err := c.start("kueue", kueueBin, kueueArgs, kueueEnv...)
	if err != nil {
		return err
	}

	// Argo's workflow-controller.
	if err := c.createArgoConfig(ctx); err != nil {
		return err
	}
	argoID := "lab-" + randomID()
	argo, err := c.start("workflow-controller", c.bin(binArgo), []string{
		"--kubeconfig=" + c.kubeconfigPath("workflow-controller"),
		"--namespace=" + ArgoNamespace,
		"--configmap=workflow-controller-configmap",
		"--executor-image=quay.io/argoproj/argoexec:" + ArgoVersion,
		"--loglevel=info",
	}, "LEADER_ELECTION_IDENTITY="+argoID)
	if err != nil {
		return err
	}
	all := append(append([]*process{}, core...), kwok, kueue, argo)

	// Readiness checks that do not depend on each other run together.
	waits := []func() error{
		func() error {
			if err := c.waitReady(ctx, "kueue ready", all, func(ctx context.Context) (bool, error) {
				body, err := httpGet(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/readyz", pt.KueueHealth))
				return err == nil && body == "ok", err
			}); err != nil {
				return err
			}
			if err := c.registerKueueWebhooks(ctx); err != nil {
				return err
			}
			return c.waitReady(ctx, "kueue webhooks answering", all, c.kueueWebhookAnswers)
		},
		func() error {
			return c.waitReady(ctx, "nodes "+strings.Join(c.NodeNames(), ", ")+" Ready", all, c.nodesReady)
		},
		func() error {
			return c.waitReady(ctx, "argo workflow-controller leading", all, func(ctx context.Context) (bool, error) {
				l, err := c.client.CoordinationV1().Leases(ArgoNamespace).Get(ctx, "workflow-controller", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == argoID, nil
			})
		},
		func() error {
			return c.waitReady(ctx, "kube-controller-manager serving (default service account)", all, func(ctx context.Context) (bool, error) {
				_, err := c.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
				return err == nil, err
			})
		},
		func() error {
			return c.waitReady(ctx, "kube-scheduler healthy", all, func(ctx context.Context) (bool, error) {
				body, err := httpGet(ctx, c.tlsClient(), fmt.Sprintf("https://127.0.0.1:%d/healthz", pt.Scheduler))
				return err == nil && body == "ok", err
			})
		},
	}
	var wg sync.WaitGroup
	errs := make([]error, len(waits))
	for i, w := range waits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitReady polls check until it reports true, failing early if one of the
// watched processes exits.
func (c *Cluster) waitReady(ctx context.Context, what string, watch []*process, check func(context.Context) (bool, error)) error {
	t0 := time.Now()
	var lastErr error
	for {
		for _, p := range watch {
			if done, werr := p.exited(); done {
				return fmt.Errorf("cluster: %s exited (%v) while waiting for %s; last lines of %s:\n%s", p.name, werr, what, p.logPath, p.tail(40))
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := check(cctx)
		cancel()
		if ok {
			c.logf("lab-cluster: %s after %s", what, time.Since(t0).Round(10*time.Millisecond))
			return nil
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			var tails []string
			for _, p := range watch {
				tails = append(tails, fmt.Sprintf("--- %s (%s):\n%s", p.name, p.logPath, p.tail(15)))
			}
			return fmt.Errorf("cluster: timed out waiting for %s (last error: %v)\n%s", what, lastErr, strings.Join(tails, "\n"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func httpGet(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return strings.TrimSpace(string(body)), nil
}

func (c *Cluster) tlsClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.pki.caPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func (c *Cluster) createNode(ctx context.Context) error {
	for _, n := range append([]NodeOptions{c.opts.Node}, c.opts.MoreNodes...) {
		if err := c.createOneNode(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) createOneNode(ctx context.Context, n NodeOptions) error {
	labels := map[string]string{
		"kubernetes.io/hostname": n.Name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
	}
	for k, v := range n.Labels {
		labels[k] = v
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.Name,
			Labels:      labels,
			Annotations: map[string]string{kwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{
			Capacity:    n.Capacity.DeepCopy(),
			Allocatable: n.Capacity.DeepCopy(),
		},
	}
	if _, err := c.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating node %s: %w", n.Name, err)
	}
	return nil
}

func (c *Cluster) nodesReady(ctx context.Context) (bool, error) {
	for _, name := range c.NodeNames() {
		if ok, err := c.nodeReady(ctx, name); !ok {
			return false, err
		}
	}
	return true, nil
}

func (c *Cluster) nodeReady(ctx context.Context, name string) (bool, error) {
	node, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

// installCRDs creates Kueue's CRDs (with the conversion webhook Kueue's
// kustomization enables, pointed at the loopback webhook server) and Argo's.
func (c *Cluster) installCRDs(ctx context.Context) ([]string, error) {
	mdir := filepath.Join(c.binDir, manifestsDir)
	conversion := map[string]bool{}
	patches, err := readYAMLDir(filepath.Join(mdir, "kueue", "crd-conversion"))
	if err != nil {
		return nil, err
	}
	for _, p := range patches {
		conversion[p.GetName()] = true
	}
	kueueCRDs, err := readYAMLDir(filepath.Join(mdir, "kueue", "crds"))
	if err != nil {
		return nil, err
	}
	flavour := "minimal"
	if c.opts.ArgoFullCRDs {
		flavour = "full"
	}
	argoCRDs, err := readYAMLDir(filepath.Join(mdir, "argo", "crds", flavour))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, crd := range append(kueueCRDs, argoCRDs...) {
		if conversion[crd.GetName()] {
			err := unstructured.SetNestedField(crd.Object, map[string]any{
				"strategy": "Webhook",
				"webhook": map[string]any{
					"clientConfig": map[string]any{
						"url":      c.kueueWebhookURL("/convert"),
						"caBundle": base64.StdEncoding.EncodeToString(c.pki.caPEM),
					},
					"conversionReviewVersions": []any{"v1"},
				},
			}, "spec", "conversion")
			if err != nil {
				return nil, err
			}
		}
		if _, err := c.dyn.Resource(gvrCRD).Create(ctx, crd, metav1.CreateOptions{FieldManager: "lab-cluster"}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating CRD %s: %w", crd.GetName(), err)
		}
		names = append(names, crd.GetName())
	}
	return names, nil
}

func (c *Cluster) crdsEstablished(ctx context.Context, names []string) (bool, error) {
	for _, name := range names {
		crd, err := c.dyn.Resource(gvrCRD).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		ok := false
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				ok = true
			}
		}
		if !ok {
			return false, fmt.Errorf("CRD %s not established yet", name)
		}
	}
	c.mapper.Reset()
	return true, nil
}

func (c *Cluster) kueueWebhookURL(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", c.ports.KueueWebhook, path)
}

// kueueConfig is Kueue's Configuration (config.kueue.x-k8s.io/v1beta2).
func (c *Cluster) kueueConfig() string {
	return fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %[1]s
health:
  healthProbeBindAddress: 127.0.0.1:%[2]d
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %[3]d
  certDir: %[4]s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
clientConnection:
  qps: 50
  burst: 100
manageJobsWithoutQueueName: false
managedJobsNamespaceSelector:
  matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: [kube-system, %[1]s]
integrations:
  frameworks:
  - batch/job
  - pod
featureGates:
  # The visibility API server wants certificates in /visibility; the lab
  # cluster does not serve it.
  VisibilityOnDemand: false
`, KueueNamespace, c.ports.KueueHealth, c.ports.KueueWebhook, c.path("kueue", "certs"))
}

// kueueCommand returns how to run Kueue. With internal certificate
// management off, Kueue reads metrics certificates from the fixed path
// /etc/kueue/metrics/certs; as root the lab cluster runs it in a private mount
// namespace with an overlay on /etc that adds them, so nothing is written to
// the host's /etc. Without root, the certificates must already be there.
func (c *Cluster) kueueCommand() (bin string, args, env []string, err error) {
	args = []string{"--config=" + c.path("kueue", "config.yaml"), "--zap-log-level=info"}
	bin = c.bin(binKueue)
	env = []string{"KUBECONFIG=" + c.kubeconfigPath("kueue")}
	if _, err := os.Stat("/etc/kueue/metrics/certs/tls.crt"); err == nil {
		return bin, args, env, nil
	}
	unshare, lerr := exec.LookPath("unshare")
	if lerr != nil || os.Geteuid() != 0 {
		return "", nil, nil, errors.New("cluster: Kueue needs /etc/kueue/metrics/certs/tls.{crt,key}: run as root (with util-linux unshare) so the lab cluster can overlay them, or create them")
	}
	script := `mount -t overlay overlay -o "lowerdir=/etc,upperdir=$LAB_ETC_UPPER,workdir=$LAB_ETC_WORK" /etc && exec "$0" "$@"`
	env = append(env,
		"LAB_ETC_UPPER="+c.path("kueue", "etc", "upper"),
		"LAB_ETC_WORK="+c.path("kueue", "etc", "work"))
	return unshare, append([]string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, bin}, args...), env, nil
}

// registerKueueWebhooks installs Kueue's webhook configurations (named as
// Kueue's default install names them) with each webhook pointed at the
// loopback webhook server and the lab CA as caBundle. The pod, deployment
// and statefulset webhooks skip kube-system and kueue-system, as Kueue's
// kustomization patches them to.
func (c *Cluster) registerKueueWebhooks(ctx context.Context) error {
	objs, err := readYAMLFile(filepath.Join(c.binDir, manifestsDir, "kueue", "webhooks.yaml"))
	if err != nil {
		return err
	}
	caBundle := base64.StdEncoding.EncodeToString(c.pki.caPEM)
	exempt := map[string]bool{"mpod.kb.io": true, "vpod.kb.io": true, "mdeployment.kb.io": true, "vdeployment.kb.io": true, "mstatefulset.kb.io": true, "vstatefulset.kb.io": true}
	for _, obj := range objs {
		obj.SetName("kueue-" + obj.GetName())
		hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
		for i, h := range hooks {
			m := h.(map[string]any)
			path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
			m["clientConfig"] = map[string]any{"url": c.kueueWebhookURL(path), "caBundle": caBundle}
			if name, _ := m["name"].(string); exempt[name] {
				m["namespaceSelector"] = map[string]any{"matchExpressions": []any{map[string]any{
					"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{"kube-system", KueueNamespace},
				}}}
			}
			hooks[i] = m
		}
		if err := unstructured.SetNestedSlice(obj.Object, hooks, "webhooks"); err != nil {
			return err
		}
		gvr := gvrValidating
		if obj.GetKind() == "MutatingWebhookConfiguration" {
			gvr = gvrMutating
		}
		if _, err := c.dyn.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{FieldManager: "lab-cluster"}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// kueueWebhookAnswers does a dry-run create of a ResourceFlavor: Kueue's
// mutating webhook adds its resource-in-use finalizer, so seeing it proves
// the API server reached the webhook.
func (c *Cluster) kueueWebhookAnswers(ctx context.Context) (bool, error) {
	rf := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2",
		"kind":       "ResourceFlavor",
		"metadata":   map[string]any{"name": "lab-cluster-webhook-probe"},
	}}
	out, err := c.dyn.Resource(contract.GVRResourceFlavor).Create(ctx, rf, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return false, err
	}
	for _, f := range out.GetFinalizers() {
		if f == "kueue.x-k8s.io/resource-in-use" {
			return true, nil
		}
	}
	return false, errors.New("ResourceFlavor dry-run came back without Kueue's finalizer (webhook not called yet)")
}

// createArgoConfig creates the workflow-controller ConfigMap: metrics off
// (they would bind :9090 on all interfaces).
func (c *Cluster) createArgoConfig(ctx context.Context) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "workflow-controller-configmap", Namespace: ArgoNamespace},
		Data: map[string]string{
			"metricsConfig":   "enabled: false\n",
			"telemetryConfig": "enabled: false\n",
		},
	}
	if _, err := c.client.CoreV1().ConfigMaps(ArgoNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the workflow-controller ConfigMap: %w", err)
	}
	return nil
}

func readYAMLDir(dir string) ([]*unstructured.Unstructured, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, n := range names {
		objs, err := readYAMLFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func readYAMLFile(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := DecodeYAML(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}
