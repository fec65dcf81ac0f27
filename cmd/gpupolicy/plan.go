package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/internal/output"
	"github.com/gpupolicy/gpupolicy/internal/plan"
)

func init() { commands = append(commands, newPlanCmd) }

func newPlanCmd() *cobra.Command {
	var base, head string
	var o *output.Flag
	cmd := &cobra.Command{
		Use:   "plan --base REV [--head REV] [POLICY_DIR] [-o markdown|json|yaml|text]",
		Short: "Say what a change to the policy does, for a pull request",
		Long: `plan reads the policy in POLICY_DIR (default policies/lab) at two revisions
straight from git objects (no checkout; the working tree is not read or
changed): --base, the pull request's target, and --head (default HEAD). It
vets and renders both, and prints what the change does:

  - to admission: for every template, priority and service state whose
    outcome changes, how many jobs run at once before and after, and what
    binds them ("batch jobs at once through gpu-step-no-cache, qwen2-5-7b
    down: 1 → 4"), as gpupolicy explain models it;
  - to access: each namespace whose allowed priorities or LocalQueues
    change, and the paths by which one namespace's workloads can evict
    another's that the change takes away or opens ("experiments:
    priorities training, on-demand-llm, batch → training, batch");
  - to the findings: those the change adds, changes and clears;
  - to the render: every object and field that differs, with what it
    changes for the lab.

Output: -o markdown (default, a pull-request comment), json, yaml or text.

` + ciHelp + ` In a CI format plan reports the findings the change adds
(SARIF baselineState "new") and changes ("updated"), so only they land on
the pull request's lines.

Exit 0 when planned, 1 when the change adds a finding of severity error, 2
when the head's policy does not load or vet, or on a bad revision. A head
that does not vet has vet's problems on stderr and, in -o json and yaml,
vet's document on stdout ("valid": false, as vet -o json), in -o sarif,
junit and github vet's findings (positions in the head's files).`,
		Example: `  gpupolicy plan --base origin/main
  gpupolicy plan --base origin/main --head HEAD policies/lab -o markdown > comment.md

  # In a pull request's CI job (the base branch fetched first)
  git fetch origin "$GITHUB_BASE_REF"
  gpupolicy plan --base "origin/$GITHUB_BASE_REF" > plan.md      # the PR comment
  gpupolicy plan --base "origin/$GITHUB_BASE_REF" -o sarif > plan.sarif`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if base == "" {
				return usageError{errors.New("--base REV is required (the revision the change is compared with, e.g. origin/main)")}
			}
			repo, err := gitrepo.Open(".")
			if err != nil {
				return err
			}
			dir, err := repo.Rel(policyDirArg(args))
			if err != nil {
				return usageError{err}
			}
			r, err := plan.Plan(plan.Options{Repo: repo, Base: base, Head: head, PolicyDir: dir})
			if err != nil {
				// A head that does not vet: vet's findings in a machine format.
				return refuseUnvetted(cmd, "plan", o.Format(), dir, err)
			}
			if output.IsCI(o.Format()) {
				err = writeCI(cmd, o.Format(), planRun(r))
			} else {
				err = r.Write(cmd.OutOrStdout(), o.Format())
			}
			if err != nil {
				return err
			}
			if n := r.NewErrors(); n > 0 {
				return findingsError{fmt.Sprintf("plan: the change adds %d error finding(s)", n)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&base, "base", "", "the revision to compare with (a branch, tag or SHA)")
	cmd.Flags().StringVar(&head, "head", "HEAD", "the revision with the change")
	o = outputFlag(cmd, output.Markdown, output.WithCI(plan.Formats)...)
	return cmd
}

// planRun is plan's CI run: the findings the change adds and changes, with
// their SARIF baseline state, against the rules vet, render and explain
// apply.
func planRun(r *plan.Report) output.Run {
	run := ciRun("plan", finding.Rules(finding.Vet, finding.Render, finding.Explain), nil)
	for _, f := range r.FindingsAdded {
		run.Findings = append(run.Findings, f)
		run.Baseline = append(run.Baseline, "new")
	}
	for _, f := range r.FindingsChanged {
		run.Findings = append(run.Findings, f)
		run.Baseline = append(run.Baseline, "updated")
	}
	return run
}
