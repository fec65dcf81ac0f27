package main

import (
	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/output"
	"github.com/gpupolicy/gpupolicy/internal/version"
)

// ciRun is what a verb checked and found, for -o sarif, junit and github
// (output.WriteFindings): the rules it applied and its findings.
func ciRun(command string, rules []finding.Rule, findings []finding.Finding) output.Run {
	return output.Run{
		Tool: "gpupolicy", Version: version.Tool(), Command: command,
		InformationURI: version.InformationURI,
		Rules:          rules, Findings: findings,
	}
}

// writeCI writes a run in a CI format on the command's stdout.
func writeCI(cmd *cobra.Command, f output.Format, run output.Run) error {
	return output.WriteFindings(cmd.OutOrStdout(), f, run)
}

// ciHelp is the paragraph every reporting verb's --help has on the CI
// formats.
const ciHelp = `CI formats: -o sarif (SARIF 2.1.0 for code scanning: the rules applied,
a result per finding at its policy file:line:col), -o junit (a test case per
rule applied, a failure per error or warning finding) and -o github
(GitHub Actions annotations on the policy lines). The exit status is the
same in every format.`
