package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/output"
)

func init() { commands = append(commands, newDriftCmd) }

func newDriftCmd() *cobra.Command {
	var (
		env  string
		o    *output.Flag
		live bool
		cf   clusterFlags
	)
	cmd := &cobra.Command{
		Use:   "drift --env ENV [--live] [-o text|json|yaml|markdown]",
		Short: "Compare the render at an environment's pin with the render at HEAD",
		Long: `drift reads environment ENV's render at its pin (the commit its cluster syncs
from) and at HEAD, straight from git objects (no checkout), and reports
every difference: the object, the field, the value at the pin and at HEAD,
what it changes for the lab where that is known, and the commit that
introduced HEAD's value. A pin whose WorkflowTemplates lack the GPU-memory
declaration, for one, counts every job at the LimitRange default whatever it
declares.

The render at a commit is deploy/ENV as committed there; a commit without
deploy/ENV has its policy rendered from its own git tree through the
environment's overlay. When HEAD's deploy/ENV is not what HEAD's policy
renders (a policy change committed without its render), drift says so as a
warning (render-stale): that change is no drift until it is rendered.

With --live it also reads the environment's cluster (read-only: get, list
and watch are all it needs) and compares it with the render at the pin:
objects missing from the cluster, objects gpupolicy owns that the pin does
not render (of every kind render writes, even one the pin has none of; a
kind the reader may not list is named on stderr; an extra Namespace is
reported too, though reconcile never prunes one), and fields changed by
hand. Only the fields the render sets are
compared, so what the API server defaults or sets (uid, managedFields,
status, a ClusterQueue's flavorFungibility) is never reported, and
quantities compare by value (1Gi equals 1024Mi). It then checks every Kueue
Workload: the GPU-memory declaration its pods carry against what Kueue
counted, naming the jobs counted at the LimitRange default — the write-up's
eval job that asked for 12,452 MiB and was counted as 1,024.

Rules (ID, severity, reason; without --live only pin-drift applies):
` + finding.Help(finding.Rules(finding.Drift)) + `

Output: -o text (default), json (the report and its findings), yaml (the
same document) or markdown (a scheduled report).

` + ciHelp + `

Exit 0 when the renders (and with --live the cluster) match and no job is
counted at the default, 1 on drift, 2 on an error (a pin that names no
commit, a render that fails, a cluster that cannot be read).`,
		Example: `  gpupolicy drift --env lab
  gpupolicy drift --env lab -o markdown   # a scheduled report
  gpupolicy drift --env lab -o json
  gpupolicy drift --env local --live

  # A scheduled CI job: the report as markdown, an issue only on exit 1
  gpupolicy drift --env lab --live -o markdown > drift.md; rc=$?
  if [ $rc -eq 1 ]; then gh issue create --title "GPU policy drift" --body-file drift.md; fi
  gpupolicy drift --env lab -o sarif > drift.sarif`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if env == "" {
				return usageError{errors.New("--env ENV is required")}
			}
			t, err := openEnv(env, true)
			if err != nil {
				return err
			}
			if t.Env.Pin == "" {
				return fmt.Errorf("environment %s has no pin yet (%s): set one with gpupolicy pin --env %s", env, t.Env.SettingsPath(), env)
			}
			r, err := drift.Git(cmd.Context(), drift.Options{
				Repo: t.Repo, Env: env, Pin: t.Env.Pin,
				PolicyDir: t.Env.Policy, EnvDir: t.Env.Dir(),
				RenderAt: t.RenderAt, CheckRender: true,
			})
			if drift.IsUnknownRevision(err) {
				return fmt.Errorf("environment %s: the pin in %s: %v\nmove it with gpupolicy pin --env %s [REV]",
					env, t.Env.SettingsPath(), err, env)
			}
			if err != nil {
				return err
			}
			if live {
				return runLiveDrift(cmd, t, r, cf, o.Format())
			}
			if output.IsCI(o.Format()) {
				err = writeCI(cmd, o.Format(), ciRun("drift", []finding.Rule{drift.RulePinDrift, drift.RuleRenderStale}, r.Findings))
			} else {
				err = r.Write(cmd.OutOrStdout(), o.Format())
			}
			if err != nil {
				return err
			}
			if r.Drifted() {
				return findingsError{}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&live, "live", false, "also compare the environment's cluster with the pin, and check what Kueue counted")
	cf.add(cmd)
	cmd.Flags().StringVar(&env, "env", "", "the environment (environments/ENV)")
	o = outputFlag(cmd, output.Text, output.WithCI(drift.Formats)...)
	return cmd
}
