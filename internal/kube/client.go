// Package kube builds the Kubernetes clients gpupolicy's cluster verbs
// share (reconcile, drift --live, status, verify) from a kubeconfig and
// context.
//
// Every request goes through the dynamic client (objects as unstructured,
// converted to the k8s.io/api types where code wants them typed: List, Get)
// or a plain REST client (discovery, the server's version, a pod's log).
// client-go's typed clientset and its discovery client (which imports the
// clientset's scheme) are not used: their 58 packages register every
// built-in API group in client-go's scheme at package init, some 10,000
// allocations and 4-6 ms of CPU that every gpupolicy run paid before main,
// vet and render included (issue 17; GODEBUG=inittrace=1).
package kube

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Clients talk to one cluster.
type Clients struct {
	Config  *rest.Config
	Dynamic dynamic.Interface
	// REST is an unversioned REST client of the cluster (JSON), for the
	// paths the dynamic client does not serve: discovery, /version, a
	// pod's log.
	REST rest.Interface
	// Mapper maps kinds to resources through discovery, read per API group
	// on first use and cached, and re-read when a kind is not found (a CRD
	// installed since): NewMapper.
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
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	rc := dynamic.ConfigFor(cfg)
	rc.AcceptContentTypes, rc.ContentType = "application/json", "application/json"
	rc.NegotiatedSerializer = statusCodecs().WithoutConversion()
	r, err := rest.UnversionedRESTClientForConfigAndClient(rc, httpClient)
	if err != nil {
		return nil, err
	}
	return &Clients{Config: cfg, Dynamic: dyn, REST: r, Mapper: NewMapper(r)}, nil
}

// statusCodecs decode what the REST client reads as objects: only a
// failed request's metav1.Status (its reason and message become the
// error, as with a typed client); discovery documents and logs are read
// raw (getJSON, PodLog). Built per client, not at package init.
func statusCodecs() serializer.CodecFactory {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(s)
}

// ServerVersion asks the API server for its version (GET /version).
func (c *Clients) ServerVersion(ctx context.Context) (*version.Info, error) {
	var v version.Info
	if err := getJSON(ctx, c.REST, "/version", &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// getJSON GETs path (absolute, e.g. "/apis/kueue.x-k8s.io") and decodes
// its JSON body into out.
func getJSON(ctx context.Context, r rest.Interface, path string, out any) error {
	raw, err := r.Get().AbsPath(path).Do(ctx).Raw()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}

func orDefault(p string) string {
	if p == "" {
		return "(default: $KUBECONFIG or ~/.kube/config)"
	}
	return p
}
