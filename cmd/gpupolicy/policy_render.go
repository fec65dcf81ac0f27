package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render"
)

func init() { commands = append(commands, newRenderCmd) }

func newRenderCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "render [POLICY_DIR]",
		Short: "Compile a policy into Kueue, Argo Workflows and device-plugin manifests",
		Long: `render compiles the CUE policy in POLICY_DIR (default policies/lab) into the
Kubernetes objects that run it, one YAML file each:

  Namespace              every namespace the policy uses
  ResourceFlavor         one per card (its nodeLabels)
  Cohort                 one per declared cohort (policy field cohorts):
                         its parent and its own quotas (cohort_NAME.yaml)
  ClusterQueue           one per queue: cohort, quotas of shares, host memory
                         and declared GPU memory, preemption and
                         flavorFungibility (a queue with several cards)
  LocalQueue             one per queue and namespace
  WorkloadPriorityClass  one per rung of the priority ladder
  ConfigMap              the Argo semaphores (one key per lock, value = size)
                         per job namespace, and the NVIDIA device plugin's
                         time-slicing config (one key per card)
  WorkflowTemplate       one per GPU step template, and its cache-free variant
  LimitRange             per job namespace: a job that declares no GPU memory
                         is counted at the policy's default
  ValidatingAdmissionPolicy (+ Binding)
                         per namespace where GPU workloads run: the API
                         server rejects a GPU pod without a LocalQueue, and
                         a queue or priority the namespace may not use
                         (policy field access; CEL, no webhook)

Every Kueue and Argo object is checked against the real CRDs (Kueue v0.17.0,
Argo Workflows v3.7.3), OpenAPI schema and CEL rules, before anything is
written; a failure is reported at the policy field it comes from, as
file:line:col: crd: message, and exits 2.

Files are named <kind>_<name>.yaml, or <kind>_<namespace>_<name>.yaml for
namespaced objects, beside a kustomization.yaml that lists them, so the
directory is a kustomize base. The output directory (default out/<policy
name>) is replaced as a whole, atomically: a failed render leaves the
previous one intact. Rendering is byte-for-byte deterministic, so renders
diff cleanly in git. Every object carries the labels
app.kubernetes.io/managed-by=gpupolicy and gpupolicy.dev/policy=<name>.

Exit 0 when written, 2 on a problem in the policy or its render.`,
		Example: `  gpupolicy render                      # policies/lab into out/lab
  gpupolicy render policies/lab --out /tmp/lab
  kubectl kustomize out/lab             # the render is a kustomize base`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("out") && out == "" {
				return usageError{errors.New(`--out "" names no directory: give one, or drop --out for out/<policy name>`)}
			}
			dir := policyDirArg(args)
			p, err := policy.Load(dir)
			if err != nil {
				return err
			}
			// Only a problem in the render asks for a position from here
			// (the policy is evaluated again for it).
			p.ReleaseSource()
			res, err := render.Render(p)
			if err != nil {
				return err
			}
			dest := out
			if dest == "" {
				dest = filepath.Join("out", p.Name)
			}
			written, err := render.Write(dest, res.Files)
			if err != nil {
				return err
			}
			if !written {
				fmt.Fprintf(cmd.OutOrStdout(), "%s is up to date: %d objects: %s\n", dest, len(res.Objects), renderKindCounts(res.Objects))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d objects to %s: %s\n", len(res.Objects), dest, renderKindCounts(res.Objects))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "output directory, replaced as a whole (default out/<policy name>)")
	// --env, --check and --commit render an environment (env_render.go).
	return withRenderEnv(cmd)
}

// renderKindOrder is the order the summary lists kinds in: what a reader checks
// first (the Kueue quotas) to last.
var renderKindOrder = []string{
	"ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass",
	"WorkflowTemplate", "ConfigMap", "LimitRange", "Namespace",
}

// renderKindCounts is "1 ResourceFlavor, 2 ClusterQueues, ...".
func renderKindCounts(objs []render.Object) string {
	n := map[string]int{}
	for _, o := range objs {
		n[o.Kind]++
	}
	var parts []string
	add := func(kind string) {
		if n[kind] == 0 {
			return
		}
		parts = append(parts, fmt.Sprintf("%d %s", n[kind], renderPlural(kind, n[kind])))
		delete(n, kind)
	}
	for _, k := range renderKindOrder {
		add(k)
	}
	var rest []string
	for k := range n {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	for _, k := range rest {
		add(k)
	}
	return strings.Join(parts, ", ")
}

func renderPlural(kind string, n int) string {
	switch {
	case n == 1:
		return kind
	case strings.HasSuffix(kind, "s"):
		return kind + "es"
	case strings.HasSuffix(kind, "y") && !strings.ContainsAny(kind[len(kind)-2:len(kind)-1], "aeiou"):
		return kind[:len(kind)-1] + "ies" // ValidatingAdmissionPolicy → ValidatingAdmissionPolicies
	default:
		return kind + "s"
	}
}
