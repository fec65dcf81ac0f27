package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// clusterFlags are the flags of the verbs that talk to an environment's
// cluster; the environment's settings supply the defaults.
type clusterFlags struct {
	kubeconfig, context string
}

func (f *clusterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: the environment's kubeconfig setting, then $KUBECONFIG, then ~/.kube/config)")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig context (default: the environment's context setting, then the kubeconfig's current context)")
}

// clients connects to the environment's cluster.
func (f *clusterFlags) clients(t *envTarget) (*kube.Clients, string, error) {
	kc, ctx := f.kubeconfig, f.context
	if kc == "" && t.Env.Kubeconfig != "" {
		kc = filepath.Join(t.Root, filepath.FromSlash(t.Env.Kubeconfig))
	}
	if ctx == "" {
		ctx = t.Env.Context
	}
	c, err := kube.New(kc, ctx)
	if err != nil {
		return nil, "", err
	}
	where := c.Config.Host
	if ctx != "" {
		where = "context " + ctx + " (" + c.Config.Host + ")"
	}
	// Ask once, so that an unreachable cluster is reported as that and not
	// as a missing CRD further on.
	if _, err := c.ServerVersion(context.Background()); err != nil {
		return nil, "", fmt.Errorf("cannot reach the cluster at %s: %w", where, err)
	}
	return c, where, nil
}

// ownerLabels select what reconcile owns (and may prune) in an environment.
func ownerLabels(env string) map[string]string {
	return map[string]string{contract.LabelManagedBy: contract.ManagedBy, contract.LabelEnvironment: env}
}

func unstructuredObjects(set drift.Set) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(set))
	for _, ref := range set.Refs() {
		out = append(out, &unstructured.Unstructured{Object: set[ref].Body})
	}
	return out
}
