package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/output"
)

// refuseUnvetted is what a verb that refuses a policy failing vet (explain;
// plan, for the head's policy) returns, after writing vet's findings on
// stdout in the machine format f, so that a report file
// (explain -o sarif > explain.sarif) holds the problems rather than
// nothing:
//
//   - sarif, junit, github: the verb's run (command) with the rules vet
//     checked (vetRulesChecked) and vet's findings, as vet writes them;
//   - json, yaml: vet's document ({"dir", "valid": false, "findings"}, as
//     vet -o json), which a machine tells from the verb's own by "valid";
//   - text, markdown: nothing (the problems go to stderr).
//
// err is returned as it is (exit 2, the problems on stderr: exitCode; a
// failed write is said on stderr too);
// an err that carries no finding.List (a policy directory that cannot be
// read, a bad revision) writes nothing. dir is the policy directory, for
// the document's "dir".
func refuseUnvetted(cmd *cobra.Command, command string, f output.Format, dir string, err error) error {
	var ds finding.List
	if !errors.As(err, &ds) || len(ds) == 0 {
		return err
	}
	var werr error
	switch {
	case output.IsCI(f):
		werr = writeCI(cmd, f, ciRun(command, vetRulesChecked(ds), ds))
	case f == output.JSON || f == output.YAML:
		werr = (&vetReport{Dir: dir, Findings: ds}).Write(cmd.OutOrStdout(), f)
	}
	if werr != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "error: writing vet's findings:", werr)
	}
	return err
}
