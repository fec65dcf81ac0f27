// Package kube builds the Kubernetes clients gpupolicy's cluster verbs
// share (reconcile, drift --live, verify) from a kubeconfig and context.
package kube

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// Clients talk to one cluster.
type Clients struct {
	Config  *rest.Config
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Mapper maps kinds to resources through discovery, cached, and
	// re-reads discovery when a kind is not found (a CRD installed since).
	Mapper meta.RESTMapper
}

// New loads kubeconfig (the usual rules when empty: $KUBECONFIG, then
// ~/.kube/config) with the named context ("" for its current one).
func New(kubeconfig, context string) (*Clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", orDefault(kubeconfig), err)
	}
	return ForConfig(cfg)
}

// Client-side rate limit of the verbs' requests when the config sets none.
// client-go's own default (5 requests/s, bursts of 10) made an idle
// drift --live wait 4.7 s for some 30 requests that took 0.07 s of CPU
// (issue 10); the API server guards itself with priority and fairness, and
// every verb makes a bounded number of requests (lists are paginated, per
// kind and namespace), so the limit here only smooths a burst.
const (
	clientQPS   = 50
	clientBurst = 100
)

// ForConfig builds the clients for a REST config. A config without a rate
// limit (QPS 0, as a kubeconfig gives) gets clientQPS and clientBurst.
func ForConfig(cfg *rest.Config) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "gpupolicy"
	}
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = clientQPS, clientBurst
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	return &Clients{Config: cfg, Kube: kube, Dynamic: dyn, Mapper: restmapper.NewShortcutExpander(mapper, kube.Discovery(), nil)}, nil
}

func orDefault(p string) string {
	if p == "" {
		return "(default: $KUBECONFIG or ~/.kube/config)"
	}
	return p
}
