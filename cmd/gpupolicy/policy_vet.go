package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

func init() { commands = append(commands, newVetCmd) }

func newVetCmd() *cobra.Command {
	var rules []string
	for _, r := range policy.Rules {
		rules = append(rules, fmt.Sprintf("  %-26s %s", r.ID, r.Reason))
	}
	return &cobra.Command{
		Use:   "vet [POLICY_DIR]",
		Short: "Check a policy against the schema and the semantic rules",
		Long: `vet evaluates the CUE policy in POLICY_DIR (default policies/lab) against the
schema embedded in gpupolicy, then applies the semantic rules below. Every
problem is printed as file:line:col: rule: message, positions relative to the
current directory.

Rules beyond the schema (the schema's own constraints report as "schema"):
` + strings.Join(rules, "\n") + `

Exit 0 when the policy is clean, 2 on any problem.`,
		Example: `  gpupolicy vet
  gpupolicy vet policies/lab`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := policyDirArg(args)
			p, err := policy.Load(dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: policy %q is valid: %d card(s), %d service(s), %d queue(s), %d priorities, %d lock(s), %d template(s)\n",
				dir, p.Name, len(p.Cards), len(p.Services), len(p.Queues), len(p.Priorities), len(p.Locks), len(p.Templates))
			return nil
		},
	}
}
