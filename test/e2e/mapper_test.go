package e2e

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
)

// TestMapperMatchesClientGo: kube.Mapper (discovery read per group over
// REST, without client-go's discovery client) maps kinds and resources as
// client-go's discovery RESTMapper does on the same API server, re-reads a
// group for a kind installed since its first read, and says NoKindMatch
// for a kind nobody serves.
func TestMapperMatchesClientGo(t *testing.T) {
	c := clustertest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc, err := kube.ForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if v, err := kc.ServerVersion(ctx); err != nil || v.GitVersion == "" {
		t.Fatalf("ServerVersion = %+v, %v", v, err)
	}
	want := c.RESTMapper()

	kinds := []struct {
		gk       schema.GroupKind
		versions []string
	}{
		{schema.GroupKind{Kind: "ConfigMap"}, nil},
		{schema.GroupKind{Kind: "Namespace"}, []string{"v1"}},
		{schema.GroupKind{Group: "apps", Kind: "Deployment"}, nil},
		{schema.GroupKind{Group: "kueue.x-k8s.io", Kind: "ClusterQueue"}, nil},
		{schema.GroupKind{Group: "kueue.x-k8s.io", Kind: "ClusterQueue"}, []string{"v1beta2"}},
		{schema.GroupKind{Group: "kueue.x-k8s.io", Kind: "LocalQueue"}, []string{"v1beta2"}},
		{schema.GroupKind{Group: "argoproj.io", Kind: "WorkflowTemplate"}, []string{"v1alpha1"}},
		{schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}, []string{"v1"}},
	}
	for _, k := range kinds {
		got, err := kc.Mapper.RESTMapping(k.gk, k.versions...)
		if err != nil {
			t.Errorf("RESTMapping(%v, %v): %v", k.gk, k.versions, err)
			continue
		}
		exp, err := want.RESTMapping(k.gk, k.versions...)
		if err != nil {
			t.Fatalf("client-go RESTMapping(%v, %v): %v", k.gk, k.versions, err)
		}
		if got.Resource != exp.Resource || got.GroupVersionKind != exp.GroupVersionKind || got.Scope.Name() != exp.Scope.Name() {
			t.Errorf("RESTMapping(%v, %v) = %v %v %s, client-go says %v %v %s", k.gk, k.versions,
				got.Resource, got.GroupVersionKind, got.Scope.Name(), exp.Resource, exp.GroupVersionKind, exp.Scope.Name())
		}
		gotAll, err := kc.Mapper.RESTMappings(k.gk)
		if err != nil {
			t.Fatal(err)
		}
		expAll, err := want.RESTMappings(k.gk)
		if err != nil {
			t.Fatal(err)
		}
		if len(gotAll) != len(expAll) {
			t.Errorf("RESTMappings(%v): %d mappings, client-go %d", k.gk, len(gotAll), len(expAll))
		}
	}
	for _, r := range []schema.GroupVersionResource{
		{Resource: "pods"}, {Resource: "clusterqueues"}, {Resource: "clusterqueue"},
		{Group: "argoproj.io", Resource: "workflows"}, {Group: "apps", Version: "v1", Resource: "deployments"},
	} {
		gk, err := kc.Mapper.KindFor(r)
		if err != nil {
			t.Errorf("KindFor(%v): %v", r, err)
			continue
		}
		ek, err := want.KindFor(r)
		if err != nil {
			t.Fatal(err)
		}
		gr, err := kc.Mapper.ResourceFor(r)
		if err != nil {
			t.Fatal(err)
		}
		er, err := want.ResourceFor(r)
		if err != nil {
			t.Fatal(err)
		}
		if gk != ek || gr != er {
			t.Errorf("KindFor/ResourceFor(%v) = %v, %v; client-go %v, %v", r, gk, gr, ek, er)
		}
	}

	// A kind of a group the server does not serve, then serves.
	widget := schema.GroupKind{Group: "mapper.gpupolicy.test", Kind: "Widget"}
	if _, err := kc.Mapper.RESTMapping(widget); !meta.IsNoMatchError(err) {
		t.Fatalf("RESTMapping(%v) before its CRD: %v, want a NoKindMatchError", widget, err)
	}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.mapper.gpupolicy.test"},
		"spec": map[string]any{
			"group": "mapper.gpupolicy.test", "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object"}}}},
		},
	}}
	if _, err := c.Dynamic().Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	defer func() {
		_ = c.Dynamic().Resource(crds).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
	}()
	var m *meta.RESTMapping
	clustertest.WaitFor(t, ctx, "the Widget kind in discovery", func(context.Context) (bool, error) {
		m, err = kc.Mapper.RESTMapping(widget)
		return err == nil, nil
	})
	if want := (schema.GroupVersionResource{Group: "mapper.gpupolicy.test", Version: "v1", Resource: "widgets"}); m.Resource != want || m.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Errorf("RESTMapping(%v) = %v %s, want %v namespaced", widget, m.Resource, m.Scope.Name(), want)
	}
	if _, err := kc.Mapper.RESTMapping(schema.GroupKind{Group: "kueue.x-k8s.io", Kind: "NoSuchKind"}); !meta.IsNoMatchError(err) {
		t.Errorf("RESTMapping(NoSuchKind) = %v, want a NoKindMatchError", err)
	}
}
