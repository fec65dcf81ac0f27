// Lab helpers: they set the local lab cluster (package cluster) up the
// way the lab runs: the local environment's render deployed, the always-on
// models up as pods through their queue, the on-demand 7B up or down. The
// tests of verify and of `gpupolicy verify` share it.
package clustertest

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/kube/reconcile"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// Env is the environment the tests deploy: the local cluster's.
const Env = "local"

// Deploy applies the local environment's render of p (ordered and
// server-side applied, as gpupolicy reconcile does), makes p's GPU nodes
// ready as reconcile does (ReadyNodes), and waits until every namespace of
// the policy has its default service account.
func Deploy(ctx context.Context, c *cluster.Cluster, p *policy.Policy) error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	env, err := environment.Load(root, Env)
	if err != nil {
		return err
	}
	files, err := env.Render(p)
	if err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for name, b := range files {
		if name == environment.KustomizationFile {
			continue
		}
		more, err := cluster.DecodeYAML(b)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		objs = append(objs, more...)
	}
	rec := reconcile.Reconciler{Client: c.Dynamic(), Mapper: c.RESTMapper()}
	if _, err := rec.Apply(ctx, objs, reconcile.Options{Owner: map[string]string{contract.LabelManagedBy: contract.ManagedBy, contract.LabelPolicy: p.Name}}); err != nil {
		return err
	}
	if err := ReadyNodes(ctx, c, p); err != nil {
		return err
	}
	for _, ns := range p.Namespaces() {
		if err := c.CreateNamespace(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

// ReadyNodes makes p's GPU nodes ready through reconcile's node readiness
// (the declaration advertised, the device-plugin config label), the product's
// own path: the local cluster's nodes start without either, as real ones do.
// A card with no node, or a node two cards select, is an error here.
func ReadyNodes(ctx context.Context, c *cluster.Cluster, p *policy.Policy) error {
	rec := reconcile.Reconciler{Client: c.Dynamic(), Mapper: c.RESTMapper()}
	_, rep, err := rec.ReadyNodes(ctx, p, false, nil)
	if err != nil {
		return err
	}
	if fs := rep.Findings(); len(fs) > 0 {
		return fmt.Errorf("node readiness: %v", fs)
	}
	return nil
}

// LabPolicy loads policies/lab from the working tree.
func LabPolicy() (*policy.Policy, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	return policy.Load(filepath.Join(root, "policies", "lab"))
}

// WithLock returns a copy of p with one lock at size. A lock p lacks is
// added and taken by every GPU step template and its cache-free variant,
// as the write-ups' series took its main lock (policies/lab takes none:
// Kueue alone gates), so tests can run the lab behind an Argo lock.
func WithLock(p *policy.Policy, lock string, size int64) *policy.Policy {
	q := *p
	q.Locks = map[string]policy.Lock{}
	for n, l := range p.Locks {
		if n == lock {
			l.Size = size
		}
		q.Locks[n] = l
	}
	if _, ok := p.Locks[lock]; ok {
		return &q
	}
	q.Locks[lock] = policy.Lock{Name: lock, Size: size}
	q.Templates = map[string]policy.Template{}
	for n, t := range p.Templates {
		t.Locks = append(slices.Clone(t.Locks), lock)
		if t.CacheFree != nil {
			cf := *t.CacheFree
			cf.Locks = append(slices.Clone(cf.Locks), lock)
			t.CacheFree = &cf
		}
		q.Templates[n] = t
	}
	return &q
}

// StartService runs a service of the policy as a pod named after it,
// through its queue at its priority, with its request (running until
// deleted: the simulated node runs pods without a run time forever), and
// waits until its Workload holds quota in the service's ClusterQueue.
func StartService(ctx context.Context, c *cluster.Cluster, p *policy.Policy, name string) error {
	s, ok := p.Services[name]
	if !ok {
		return fmt.Errorf("no service %q in the policy", name)
	}
	q := p.Queues[s.Queue]
	rl := corev1.ResourceList{}
	for _, k := range policy.Kinds {
		rl[corev1.ResourceName(p.Resource(k))] = k.Quantity(s.Request.Get(k))
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: map[string]string{
			contract.LabelKueueQueue: q.LocalQueue, contract.LabelKueuePriority: s.Priority, "app.kubernetes.io/name": name,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "lab.local/" + name + ":latest",
			Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}}},
	}
	if _, err := c.Clientset().CoreV1().Pods(s.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return Poll(ctx, "service "+name+" holding quota in "+s.Queue, func(ctx context.Context) (bool, error) {
		l, err := c.Dynamic().Resource(contract.GVRWorkload).Namespace(s.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, w := range l.Items {
			owners := w.GetOwnerReferences()
			if len(owners) == 0 || owners[0].Name != name {
				continue
			}
			cq, _, _ := unstructured.NestedString(w.Object, "status", "admission", "clusterQueue")
			return cq == s.Queue && ConditionTrue(&w, "QuotaReserved") && !ConditionTrue(&w, "Finished"), nil
		}
		return false, nil
	})
}

// StopService deletes a service's pod and waits until it is gone.
func StopService(ctx context.Context, c *cluster.Cluster, p *policy.Policy, name string) error {
	ns := p.Services[name].Namespace
	if err := c.Clientset().CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return Poll(ctx, "service "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := c.Clientset().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// LabUp deploys p and brings the services to the lab's usual state: every
// always-on model up, every on-demand service down.
func LabUp(ctx context.Context, c *cluster.Cluster, p *policy.Policy) error {
	if err := Deploy(ctx, c, p); err != nil {
		return err
	}
	for _, n := range p.ServiceNames() {
		var err error
		if p.Services[n].Mode == policy.AlwaysOn {
			err = StartService(ctx, c, p, n)
		} else {
			err = StopService(ctx, c, p, n)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
