package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// DecodeYAML splits a multi-document YAML (or JSON) stream into objects.
// Numbers decode as int64 where they are integers (k8s.io/apimachinery's JSON
// rules), so integer fields survive a round trip. Empty documents are
// skipped; a List is flattened into its items.
func DecodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufioReader(data))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(js)) == 0 || string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		if obj.IsList() {
			list, err := obj.ToList()
			if err != nil {
				return nil, err
			}
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			continue
		}
		out = append(out, obj)
	}
}

// Apply server-side-applies every object in a multi-document YAML stream
// (field manager "lab-cluster", conflicts forced) and returns what the API
// server returned. Namespaced objects without a namespace go to "default".
func (c *Cluster) Apply(ctx context.Context, manifests []byte) ([]*unstructured.Unstructured, error) {
	objs, err := DecodeYAML(manifests)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		applied, err := c.applyOne(ctx, obj)
		if err != nil {
			return out, fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		out = append(out, applied)
	}
	return out, nil
}

func (c *Cluster) applyOne(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.mapper.Reset()
		mapping, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, err
	}
	ri := c.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
			obj.SetNamespace(ns)
		}
		return ri.Namespace(ns).Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "lab-cluster", Force: true})
	}
	return ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "lab-cluster", Force: true})
}

// CreateNamespace creates a namespace (if it does not exist) and waits until
// the controller manager has given it its default ServiceAccount, so pods can
// be created in it at once.
func (c *Cluster) CreateNamespace(ctx context.Context, name string) error {
	_, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return pollUntil(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// User is an identity minted by the lab CA and bound by RBAC.
type User struct {
	// Name is the user name (the client certificate's common name).
	Name string
	// Kubeconfig is the path of a kubeconfig that authenticates as Name.
	Kubeconfig string
	// Config is the same as a client configuration.
	Config *rest.Config
}

// ReadOnlyVerbs are the verbs a read-only identity gets.
var ReadOnlyVerbs = []string{"get", "list", "watch"}

// ReadOnlyUser mints a user that may only get, list and watch, every
// resource in every API group (a ClusterRole "lab-user:<name>" bound to it).
// Anything else it tries is Forbidden; use it to prove that a command is
// read-only.
func (c *Cluster) ReadOnlyUser(ctx context.Context, name string) (*User, error) {
	return c.User(ctx, name, rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: ReadOnlyVerbs})
}

// User mints a client certificate for name (signed by the cluster CA, in no
// group but system:authenticated), writes a kubeconfig for it in the run
// directory, and binds it cluster-wide to a ClusterRole "lab-user:<name>"
// with the given rules. It returns once the API server authorizes the user
// for the first rule.
func (c *Cluster) User(ctx context.Context, name string, rules ...rbacv1.PolicyRule) (*User, error) {
	crt, key, err := c.pki.issue(certRequest{commonName: name, client: true})
	if err != nil {
		return nil, err
	}
	path := c.kubeconfigPath("user-" + name)
	if err := writeKubeconfig(path, fmt.Sprintf("https://127.0.0.1:%d", c.ports.APIServer), c.pki.caPEM, name, crt, key); err != nil {
		return nil, err
	}
	roleName := "lab-user:" + name
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: roleName}, Rules: rules}
	if _, err := c.client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		if _, err := c.client.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}},
	}
	if _, err := c.client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	u := &User{Name: name, Kubeconfig: path, Config: cfg}
	if len(rules) == 0 || len(rules[0].Verbs) == 0 {
		return u, nil
	}
	// Wait for the RBAC authorizer's caches to see the binding.
	uc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	r := rules[0]
	attrs := &authorizationv1.ResourceAttributes{Verb: r.Verbs[0]}
	if len(r.NonResourceURLs) > 0 && len(r.Resources) == 0 {
		err = pollUntil(ctx, 10*time.Second, func(ctx context.Context) (bool, error) {
			ssar, err := uc.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: r.Verbs[0], Path: r.NonResourceURLs[0]}},
			}, metav1.CreateOptions{})
			return err == nil && ssar.Status.Allowed, nil
		})
		return u, err
	}
	if len(r.APIGroups) > 0 && r.APIGroups[0] != "*" {
		attrs.Group = r.APIGroups[0]
	}
	if len(r.Resources) > 0 && r.Resources[0] != "*" {
		attrs.Resource = r.Resources[0]
	} else {
		attrs.Resource = "pods"
	}
	err = pollUntil(ctx, 10*time.Second, func(ctx context.Context) (bool, error) {
		ssar, err := uc.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs},
		}, metav1.CreateOptions{})
		return err == nil && ssar.Status.Allowed, nil
	})
	if err != nil {
		return nil, fmt.Errorf("user %s is not authorized by RBAC yet: %w", name, err)
	}
	return u, nil
}

func pollUntil(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
