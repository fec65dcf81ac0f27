package kube

import (
	"context"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// Mapper is a meta.RESTMapper over the API server's discovery documents,
// read through a REST client (the legacy discovery paths: /api, /apis,
// /apis/GROUP and each served group-version's resource list), what
// client-go's DeferredDiscoveryRESTMapper over a memory-cached discovery
// client answers, without client-go's discovery package (see the package
// doc). It is safe for concurrent use.
//
// RESTMapping and RESTMappings, what the verbs ask, read only the kind's
// group (one request for the group, one per version it serves) and cache
// it; a kind missing from a cached group makes the group be read again
// once (a CRD installed since), then it is a *meta.NoKindMatchError. The
// resource-based lookups (KindFor, ResourceFor, ...) read every group once,
// and ask in client-go's order of preference (restmapper.NewDiscoveryRESTMapper:
// the core group's v1 first, then each group's preferred version).
type Mapper struct {
	rest rest.Interface

	mu     sync.Mutex
	groups map[string]*apiGroup // by group name, "" for the core group
	all    meta.RESTMapper      // every group, for the resource-based lookups
}

// apiGroup is one API group's discovery: its versions and each version's
// resources.
type apiGroup struct {
	info      metav1.APIGroup
	resources map[string][]metav1.APIResource // by version
}

// NewMapper returns a Mapper reading discovery through r (JSON).
func NewMapper(r rest.Interface) *Mapper {
	return &Mapper{rest: r, groups: map[string]*apiGroup{}}
}

// group returns the named group's discovery, read when not cached or when
// reload is set; fresh reports whether it was read by this call. A group
// the server does not serve has no versions.
func (m *Mapper) group(name string, reload bool) (g *apiGroup, fresh bool, err error) {
	if g, ok := m.groups[name]; ok && !reload {
		return g, false, nil
	}
	ctx := context.TODO()
	g = &apiGroup{resources: map[string][]metav1.APIResource{}}
	if name == "" {
		var vs metav1.APIVersions
		if err := getJSON(ctx, m.rest, "/api", &vs); err != nil {
			return nil, false, err
		}
		for _, v := range vs.Versions {
			g.info.Versions = append(g.info.Versions, metav1.GroupVersionForDiscovery{GroupVersion: v, Version: v})
		}
		if len(g.info.Versions) > 0 {
			g.info.PreferredVersion = g.info.Versions[0]
		}
	} else if err := getJSON(ctx, m.rest, "/apis/"+name, &g.info); apierrors.IsNotFound(err) {
		g.info = metav1.APIGroup{Name: name}
	} else if err != nil {
		return nil, false, err
	}
	for _, v := range g.info.Versions {
		path := "/apis/" + name + "/" + v.Version
		if name == "" {
			path = "/api/" + v.Version
		}
		var l metav1.APIResourceList
		if err := getJSON(ctx, m.rest, path, &l); apierrors.IsNotFound(err) {
			continue // the version went away between the two reads
		} else if err != nil {
			return nil, false, err
		}
		g.resources[v.Version] = l.APIResources
	}
	m.groups[name] = g
	return g, true, nil
}

// mappings are gk's mappings in g: in the order of versions when given,
// else the preferred version first and then the others as served.
func (g *apiGroup) mappings(gk schema.GroupKind, versions []string) []*meta.RESTMapping {
	var order []string
	for _, v := range versions {
		if v != "" {
			order = append(order, v)
		}
	}
	if len(order) == 0 {
		order = append(order, g.info.PreferredVersion.Version)
		for _, v := range g.info.Versions {
			if v.Version != g.info.PreferredVersion.Version {
				order = append(order, v.Version)
			}
		}
	}
	var out []*meta.RESTMapping
	for _, v := range order {
		for _, r := range g.resources[v] {
			if r.Kind != gk.Kind || strings.Contains(r.Name, "/") { // a subresource
				continue
			}
			scope := meta.RESTScopeRoot
			if r.Namespaced {
				scope = meta.RESTScopeNamespace
			}
			out = append(out, &meta.RESTMapping{
				Resource:         schema.GroupVersionResource{Group: gk.Group, Version: v, Resource: r.Name},
				GroupVersionKind: gk.WithVersion(v),
				Scope:            scope,
			})
			break
		}
	}
	return out
}

// RESTMappings returns gk's mappings in the versions given (every served
// version when none), the preferred first.
func (m *Mapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for reload := false; ; reload = true {
		g, fresh, err := m.group(gk.Group, reload)
		if err != nil {
			return nil, err
		}
		if ms := g.mappings(gk, versions); len(ms) > 0 {
			return ms, nil
		}
		if fresh {
			return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
		}
	}
}

// RESTMapping returns gk's mapping in the first of versions the server
// serves it in (the preferred version when none is given).
func (m *Mapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	ms, err := m.RESTMappings(gk, versions...)
	if err != nil {
		return nil, err
	}
	return ms[0], nil
}

// KindFor returns the kind of a (possibly partial) resource.
func (m *Mapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	all, err := m.every()
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return all.KindFor(resource)
}

// KindsFor returns the kinds of a (possibly partial) resource, preferred
// first.
func (m *Mapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	all, err := m.every()
	if err != nil {
		return nil, err
	}
	return all.KindsFor(resource)
}

// ResourceFor completes a partial resource.
func (m *Mapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	all, err := m.every()
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return all.ResourceFor(input)
}

// ResourcesFor completes a partial resource in every way it matches,
// preferred first.
func (m *Mapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	all, err := m.every()
	if err != nil {
		return nil, err
	}
	return all.ResourcesFor(input)
}

// ResourceSingularizer returns a resource's singular name.
func (m *Mapper) ResourceSingularizer(resource string) (string, error) {
	all, err := m.every()
	if err != nil {
		return "", err
	}
	return all.ResourceSingularizer(resource)
}

// every returns a RESTMapper over every group the server serves, read once
// (GET /apis, then each group), built as restmapper.NewDiscoveryRESTMapper
// builds it.
func (m *Mapper) every() (meta.RESTMapper, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.all != nil {
		return m.all, nil
	}
	var list metav1.APIGroupList
	if err := getJSON(context.TODO(), m.rest, "/apis", &list); err != nil {
		return nil, err
	}
	names := []string{""}
	for _, g := range list.Groups {
		names = append(names, g.Name)
	}
	var union meta.MultiRESTMapper
	resPrio := []schema.GroupVersionResource{{Group: "", Version: "v1", Resource: meta.AnyResource}}
	kindPrio := []schema.GroupVersionKind{{Group: "", Version: "v1", Kind: meta.AnyKind}}
	for _, name := range names {
		g, _, err := m.group(name, false)
		if err != nil {
			return nil, err
		}
		versions := slices.Clone(g.info.Versions)
		// The preferred version first.
		slices.SortStableFunc(versions, func(a, b metav1.GroupVersionForDiscovery) int {
			pa, pb := a.Version == g.info.PreferredVersion.Version, b.Version == g.info.PreferredVersion.Version
			switch {
			case pa && !pb:
				return -1
			case pb && !pa:
				return 1
			}
			return 0
		})
		for _, v := range versions {
			resources, ok := g.resources[v.Version]
			if !ok {
				continue
			}
			gv := schema.GroupVersion{Group: name, Version: v.Version}
			resPrio = append(resPrio, gv.WithResource(meta.AnyResource))
			kindPrio = append(kindPrio, gv.WithKind(meta.AnyKind))
			vm := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
			for _, r := range resources {
				if strings.Contains(r.Name, "/") {
					continue
				}
				scope := meta.RESTScopeRoot
				if r.Namespaced {
					scope = meta.RESTScopeNamespace
				}
				plural, singular := gv.WithResource(r.Name), gv.WithResource(r.SingularName)
				if r.SingularName == "" {
					_, singular = meta.UnsafeGuessKindToResource(gv.WithKind(r.Kind))
				}
				vm.AddSpecific(gv.WithKind(strings.ToLower(r.Kind)), plural, singular, scope)
				vm.AddSpecific(gv.WithKind(r.Kind), plural, singular, scope)
			}
			union = append(union, vm)
		}
	}
	for _, name := range names {
		resPrio = append(resPrio, schema.GroupVersionResource{Group: name, Version: meta.AnyVersion, Resource: meta.AnyResource})
		kindPrio = append(kindPrio, schema.GroupVersionKind{Group: name, Version: meta.AnyVersion, Kind: meta.AnyKind})
	}
	m.all = meta.PriorityRESTMapper{Delegate: union, ResourcePriority: resPrio, KindPriority: kindPrio}
	return m.all, nil
}
