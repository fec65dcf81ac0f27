package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/render"
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
	if kc == "" && t.env.Kubeconfig != "" {
		kc = filepath.Join(t.root, filepath.FromSlash(t.env.Kubeconfig))
	}
	if ctx == "" {
		ctx = t.env.Context
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
	if _, err := c.Kube.Discovery().ServerVersion(); err != nil {
		return nil, "", fmt.Errorf("cannot reach the cluster at %s: %w", where, err)
	}
	return c, where, nil
}

// pinnedSet reads the environment's render at its pin from git objects.
func pinnedSet(ctx context.Context, t *envTarget) (drift.Set, *drift.GitSide, error) {
	if t.env.Pin == "" {
		return nil, nil, fmt.Errorf("environment %s has no pin yet (%s): set one with gpupolicy pin --env %s",
			t.env.Name, t.env.SettingsPath(), t.env.Name)
	}
	commit, err := t.repo.Resolve(t.env.Pin)
	if err != nil {
		return nil, nil, fmt.Errorf("environment %s: the pin in %s: %v\nmove it with gpupolicy pin --env %s [REV]",
			t.env.Name, t.env.SettingsPath(), err, t.env.Name)
	}
	side := &drift.GitSide{Repo: t.repo, Env: t.env.Name, Commit: commit, RenderAt: renderAtFunc(t), Name: drift.GitSides.From}
	set, err := side.Objects(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("the render at the pin: %w", err)
	}
	return set, side, nil
}

// ownerLabels select what reconcile owns (and may prune) in an environment.
func ownerLabels(env string) map[string]string {
	return map[string]string{render.LabelManagedBy: render.ManagedBy, envLabel: env}
}

// envLabel is the label every environment overlay puts on what it deploys.
const envLabel = "gpupolicy.dev/environment"

func unstructuredObjects(set drift.Set) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(set))
	for _, ref := range set.Refs() {
		out = append(out, &unstructured.Unstructured{Object: set[ref].Body})
	}
	return out
}
