package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/output"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

func init() { commands = append(commands, newExplainCmd) }

func newExplainCmd() *cobra.Command {
	var o *output.Flag
	var states string
	cmd := &cobra.Command{
		Use:   "explain [POLICY_DIR]",
		Short: "Explain what the policy does to admission: jobs at once, what binds, who starves, dead preemption",
		Long: `explain loads the policy in POLICY_DIR (default policies/lab), vets it, and
models what Kueue ` + admission.KueueVersion + ` (classical preemption) and the Argo locks in front of it
do with the GPU jobs. For every GPU step template (and its cache-free variant
when it takes other locks), every priority on the ladder and every service
state (each on-demand service up or down), it reports how many jobs run at
once, the resources that bind, the lock's effect, what is left of each
resource, and how jobs get admitted by preemption when none fit. A lock
sized from quota (size: {fromQueue: QUEUE, state: ...}) gets the count the
model gives for its queue, and explain states the derivation ("lock main:
4 = jobs of gpu-step (...) ClusterQueue gpu-general admits at once with
every on-demand service down ...").

A template that may land on several cards of its ClusterQueue (anyCard:
true, or a card without nodeLabels in a queue of several cards) names its
cards in Kueue's order ("cards a, b: Kueue's choice, in that order"), and
each count is split per card, "8 on a 4, b 4": the first card where a job
fits, as the queue's flavorFungibility says (README, "Cards: where Kueue
puts the jobs").

A template marked exclusive (exclusive: jobs: "wait" | "evict") gets a
section "Exclusive templates": what it asks (every share and all the GPU
memory the always-on services leave; they run beside it on their own
quota), per service state whether Kueue admits it, the running jobs it
evicts or waits for, the on-demand services whose scale-down it waits
for, and what could be admitted beside it or evict it.

It also says who may evict whom: per namespace where GPU workloads run, the
priorities and LocalQueues the policy's access rules let it use and,
through each ClusterQueue's withinClusterQueue, reclaimWithinCohort and
borrowWithinCohort, which other namespaces' workloads it can evict (and
the paths the settings mean but Kueue never takes, with the reason).

Findings (stable rule IDs, the default severity first; vet's rules run
before, explain refuses a policy that does not vet):
` + finding.Help(finding.Rules(finding.Explain)) + `

Output: -o text (default, a table and the findings), json (the contract in
README.md, "explain -o json: the contract"), yaml (the same document) or
markdown (for a pull-request comment).

` + ciHelp + `

Exit 0 when no finding is an error, 1 when one is, 2 on a bad policy or
usage. A policy that does not vet is refused (exit 2) with vet's problems
on stderr and, in -o json and yaml, vet's document on stdout ("valid":
false, as vet -o json), in -o sarif, junit and github vet's findings, so a
report file is never empty.`,
		Example: `  gpupolicy explain
  gpupolicy explain policies/lab -o json
  gpupolicy explain policies/lab -o markdown > comment.md

  # In CI: fail the job on an error finding, annotate the policy lines
  gpupolicy explain -o github
  gpupolicy explain -o sarif > gpupolicy-explain.sarif`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := policyDirArg(args)
			p, err := policy.Load(dir)
			if err != nil {
				return refuseUnvetted(cmd, "explain", o.Format(), dir, err)
			}
			r, err := admission.ExplainWith(p, admission.Options{States: states})
			if err != nil {
				return refuseUnvetted(cmd, "explain", o.Format(), dir, err)
			}
			if output.IsCI(o.Format()) {
				err = writeCI(cmd, o.Format(), ciRun("explain", finding.Rules(finding.Vet, finding.Explain), r.Findings))
			} else {
				err = r.Write(cmd.OutOrStdout(), o.Format())
			}
			if err != nil {
				return err
			}
			if r.HasErrors() {
				return findingsError{fmt.Sprintf("explain: %d error finding(s) in policy %q", r.Count(finding.Error), p.Name)}
			}
			return nil
		},
	}
	o = outputFlag(cmd, output.Text, output.WithCI(admission.Formats)...)
	cmd.Flags().StringVar(&states, "states", admission.StatesAuto, fmt.Sprintf(
		"per-service-state rows: auto (up to %d on-demand services), all (up to %d, refused above), none; the answer per template and priority never needs them",
		admission.AutoOnDemand, admission.MaxOnDemand))
	return cmd
}
