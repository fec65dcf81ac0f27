package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

func init() { commands = append(commands, newExplainCmd) }

func newExplainCmd() *cobra.Command {
	var output string
	var rules []string
	for _, r := range admission.Rules {
		rules = append(rules, fmt.Sprintf("  %-20s %-14s %s", r.ID, r.Severities, r.Reason))
	}
	cmd := &cobra.Command{
		Use:   "explain [POLICY_DIR]",
		Short: "Explain what the policy does to admission: jobs at once, what binds, who starves, dead preemption",
		Long: `explain loads the policy in POLICY_DIR (default policies/lab), vets it, and
models what Kueue ` + admission.KueueVersion + ` (classical preemption) and the Argo locks in front of it
do with the GPU jobs. For every GPU step template (and its cache-free variant
when it takes other locks), every priority on the ladder and every service
state (each on-demand service up or down), it reports how many jobs run at
once, the resources that bind, the lock's effect, what is left of each
resource, and how jobs get admitted by preemption when none fit.

Findings (stable rule IDs):
` + strings.Join(rules, "\n") + `

Output: -o text (default, a table and the findings), json (the contract in
README.md, "explain -o json: the contract") or markdown (for a pull-request comment).

Exit 0 when no finding is an error, 1 when one is, 2 on a bad policy or
usage.`,
		Example: `  gpupolicy explain
  gpupolicy explain policies/lab -o json
  gpupolicy explain policies/lab -o markdown > comment.md`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "text", "json", "markdown":
			default:
				return usageError{fmt.Errorf("unknown output %q: use -o text, json or markdown", output)}
			}
			p, err := policy.Load(policyDirArg(args))
			if err != nil {
				return err
			}
			r, err := admission.Explain(p)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				err = r.WriteJSON(out)
			case "markdown":
				err = r.WriteMarkdown(out)
			default:
				err = r.WriteText(out)
			}
			if err != nil {
				return err
			}
			if r.HasErrors() {
				return findingsError{fmt.Sprintf("explain: %d error finding(s) in policy %q", r.Count(admission.SeverityError), p.Name)}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or markdown")
	return cmd
}
