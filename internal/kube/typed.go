package kube

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// The built-in resources the verbs read and write through the dynamic
// client (the Kueue, Argo and admission ones are in render/contract).
var (
	GVRPod        = corev1.SchemeGroupVersion.WithResource("pods")
	GVRConfigMap  = corev1.SchemeGroupVersion.WithResource("configmaps")
	GVREvent      = corev1.SchemeGroupVersion.WithResource("events")
	GVRReplicaSet = appsv1.SchemeGroupVersion.WithResource("replicasets")
	GVRDeployment = appsv1.SchemeGroupVersion.WithResource("deployments")
)

// List lists resource gvr in namespace ns ("" for every namespace, or a
// cluster-scoped resource) with opts, and converts each item into T, the
// resource's Go type (corev1.Pod for GVRPod):
// runtime.DefaultUnstructuredConverter, as a typed client decodes it. The
// error of a failed conversion names the object.
func List[T any](ctx context.Context, c dynamic.Interface, gvr schema.GroupVersionResource, ns string, opts metav1.ListOptions) ([]T, error) {
	l, err := c.Resource(gvr).Namespace(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(l.Items))
	for i := range l.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(l.Items[i].Object, &out[i]); err != nil {
			return nil, fmt.Errorf("decoding %s %s: %w", gvr.Resource, objectName(l.Items[i].GetNamespace(), l.Items[i].GetName()), err)
		}
	}
	return out, nil
}

// Get reads object name of resource gvr in namespace ns ("" when
// cluster-scoped) as T (see List). A missing object is the API server's
// NotFound error (apierrors.IsNotFound).
func Get[T any](ctx context.Context, c dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) (*T, error) {
	u, err := c.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		return nil, fmt.Errorf("decoding %s %s: %w", gvr.Resource, objectName(ns, name), err)
	}
	return &out, nil
}

// PodLog reads up to limitBytes of the log of a pod's container
// (GET /api/v1/namespaces/NS/pods/NAME/log), through r (Clients.REST).
func PodLog(ctx context.Context, r rest.Interface, ns, pod, container string, limitBytes int64) ([]byte, error) {
	return r.Get().AbsPath("/api/v1/namespaces", ns, "pods", pod, "log").
		Param("container", container).Param("limitBytes", fmt.Sprint(limitBytes)).
		Do(ctx).Raw()
}

func objectName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
