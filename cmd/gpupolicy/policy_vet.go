package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/output"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render"
)

func init() { commands = append(commands, newVetCmd) }

// vetFormats are the formats vet prints: its problems are findings, but a
// policy that does not vet is an input error (exit 2), so there is no
// markdown report.
var vetFormats = []output.Format{output.Text, output.JSON, output.YAML}

func newVetCmd() *cobra.Command {
	var o *output.Flag
	cmd := &cobra.Command{
		Use:   "vet [POLICY_DIR]",
		Short: "Check a policy against the schema and the semantic rules",
		Long: `vet evaluates the CUE policy in POLICY_DIR (default policies/lab) against the
schema embedded in gpupolicy, then applies the semantic rules below and
every check render applies before it writes (the CRDs, rule crd), so that a
policy that vets renders. Every problem is printed as file:line:col: rule:
message, a warning as file:line:col: rule: warning: message (beside the
errors, when there are any), positions relative to the current directory,
in the policy's own files.

Policy fields to know beyond queues, services, templates and locks (all in
schema/policy.cue; the README section in quotes):
  cohorts            Kueue Cohort objects: a tree of cohorts, each with a parent and quota of its own ("A department: Cohort objects and a cohort tree")
  flavorFungibility  per queue: whether a job tries the queue's next card before borrowing or preempting ("Cards: where Kueue puts the jobs")
  anyCard            per template: true leaves the card to Kueue, any of its queue's cards ("Cards: where Kueue puts the jobs")
  exclusive          per template, jobs: "wait" | "evict": the card to itself by quota ("Exclusive templates")

Rules (ID, severity, reason):
` + finding.Help(finding.Rules(finding.Vet)) + `

Output: -o text (default: the problems on stderr), json or yaml (the policy
and its findings on stdout, each as in explain -o json).

` + ciHelp + `

Exit 0 when the policy is clean or has only warnings (printed before the
summary, and in -o json's findings), 2 on any problem.`,
		Example: `  gpupolicy vet
  gpupolicy vet policies/lab
  gpupolicy vet policies/lab -o json

  # In CI: annotations on the pull request's lines, and SARIF for code scanning
  gpupolicy vet -o github
  gpupolicy vet -o sarif > gpupolicy-vet.sarif`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := policyDirArg(args)
			p, err := policy.Load(dir)
			var warnings finding.List
			if err == nil {
				warnings = p.Warnings()
				// From here on only a problem asks for a position (the
				// policy is evaluated again for it): the evaluated CUE
				// need not be marked by every collection of the checks.
				p.ReleaseSource()
				// What render would refuse (a name clash, a CRD), vet
				// refuses first: a policy that vets renders.
				var ds finding.List
				if ds, err = render.Check(p); err == nil && len(ds) > 0 {
					// Its warnings beside (Load adds them to its own).
					ds = append(ds, warnings...)
					ds.SortByPos()
					err = ds
				}
			}
			r := &vetReport{Dir: dir, Findings: []finding.Finding{}}
			var ds finding.List
			switch {
			case errors.As(err, &ds):
				r.Findings = ds
			case err != nil:
				return err
			default:
				// Warnings (card-any-flavor) leave the policy valid.
				r.Policy, r.Valid, r.p = p.Name, true, p
				if len(warnings) > 0 {
					r.Findings = warnings
				}
			}
			if output.IsCI(o.Format()) {
				if err := writeCI(cmd, o.Format(), ciRun("vet", vetRulesChecked(r.Findings), r.Findings)); err != nil {
					return err
				}
				if !r.Valid {
					return fmt.Errorf("%d problem(s) in the policy", problems(r.Findings))
				}
				return nil
			}
			if o.Format() == output.Text && !r.Valid {
				return ds // exitCode prints them on stderr
			}
			if err := r.Write(cmd.OutOrStdout(), o.Format()); err != nil {
				return err
			}
			if !r.Valid {
				return fmt.Errorf("%d problem(s) in the policy", problems(r.Findings))
			}
			return nil
		},
	}
	o = outputFlag(cmd, output.Text, output.WithCI(vetFormats)...)
	return cmd
}

// vetReport is what vet found.
type vetReport struct {
	Dir string `json:"dir"`
	// Policy is the policy's name, when it vets.
	Policy   string            `json:"policy,omitempty"`
	Valid    bool              `json:"valid"`
	Findings []finding.Finding `json:"findings"`

	p *policy.Policy
}

// Write prints the report (output.Writer).
func (r *vetReport) Write(w io.Writer, f output.Format) error {
	switch f {
	case output.JSON:
		return output.WriteJSON(w, r)
	case output.YAML:
		return output.WriteYAML(w, r)
	}
	if !r.Valid {
		for _, d := range r.Findings {
			fmt.Fprintln(w, d.String())
		}
		return nil
	}
	for _, d := range r.Findings {
		fmt.Fprintln(w, d.String())
	}
	p := r.p
	cohorts := "" // said only when the policy declares Cohort objects
	if len(p.Cohorts) > 0 {
		cohorts = fmt.Sprintf(" (%d Cohort(s))", len(p.Cohorts))
	}
	_, err := fmt.Fprintf(w, "%s: policy %q is valid: %d card(s), %d service(s), %d queue(s)%s, %d priorities, %d lock(s), %d template(s)\n",
		r.Dir, p.Name, len(p.Cards), len(p.Services), len(p.Queues), cohorts, len(p.Priorities), len(p.Locks), len(p.Templates))
	return err
}

// vetRulesChecked are the rules vet applied: all of them, or only the
// ones CUE's evaluation reports (syntax, schema, not-modelled) when the
// policy does not parse or fit the schema (the semantic rules never ran,
// so a CI report does not show them as passed).
func vetRulesChecked(fs []finding.Finding) []finding.Rule {
	for _, f := range fs {
		if f.Rule == policy.RuleSyntax.ID || f.Rule == policy.RuleSchema.ID || f.Rule == policy.RuleNotModelled.ID {
			return []finding.Rule{policy.RuleSyntax, policy.RuleSchema, policy.RuleNotModelled}
		}
	}
	return finding.Rules(finding.Vet)
}
