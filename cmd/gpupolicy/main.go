// Command gpupolicy runs one shared GPU by policy: it vets a CUE policy,
// renders it to Kueue, Argo Workflows and device-plugin manifests, explains
// what it does to admission, finds drift and verifies a deploy.
//
// Exit codes: 0 clean; 1 findings (a failed rule, drift, a failed
// verification); 2 usage or input error.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	_ "github.com/gpupolicy/gpupolicy/internal/gctune" // the collector's percent, set during package init
	"github.com/gpupolicy/gpupolicy/internal/output"
)

// Exit codes, one place.
const (
	exitClean    = 0
	exitFindings = 1
	exitInput    = 2
)

// findingsError means the command ran and found something (exit 1); the
// report has already been printed.
type findingsError struct{ msg string }

func (e findingsError) Error() string { return e.msg }

// usageError is a bad flag or argument (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the CLI and maps the outcome to an exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	var prof profiler // hidden --cpuprofile, --memprofile (profile.go)
	prof.register(root)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	prof.stop(stderr)
	return exitCode(err, stderr)
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitClean
	}
	var fe findingsError
	if errors.As(err, &fe) {
		if fe.msg != "" {
			fmt.Fprintln(stderr, fe.msg)
		}
		return exitFindings
	}
	var ds finding.List
	if errors.As(err, &ds) {
		for _, d := range ds {
			fmt.Fprintln(stderr, d.String())
		}
		fmt.Fprintf(stderr, "%d problem(s) in the policy\n", problems(ds))
		return exitInput
	}
	fmt.Fprintln(stderr, "error:", err)
	return exitInput
}

// problems counts the findings that make a policy invalid: all but its
// warnings and notes (a refused policy's List carries its warnings too).
func problems(ds finding.List) int {
	return len(ds) - ds.Count(finding.Warning) - ds.Count(finding.Info)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "gpupolicy",
		Short: "Run a shared GPU by policy: vet, render, explain, drift, verify",
		Long: `gpupolicy compiles a CUE policy for a shared, time-sliced GPU into Kueue,
Argo Workflows and NVIDIA device-plugin manifests, and tells you what the
policy does to admission before and after you deploy it.

A policy (policies/lab is the lab's) describes the card and its time-slicing
shares, the services that hold them, the Kueue ClusterQueues and cohort, the
priority ladder (WorkloadPriorityClasses), the Argo semaphores (locks) and
the GPU step WorkflowTemplates.

Exit codes: 0 clean; 1 findings (a failed rule, drift, a failed verification);
2 usage or input error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w\nRun '%s --help' for usage.", err, c.CommandPath())}
	})
	for _, c := range commands {
		root.AddCommand(c())
	}
	return root
}

// commands holds every verb's constructor; each verb's file registers
// itself in an init function, so adding a verb touches no other file.
var commands []func() *cobra.Command

// outputFlag adds the verb's -o flag: the formats it accepts, validated
// when the flag is parsed (a bad one is a usage error, exit 2, naming the
// accepted formats).
func outputFlag(cmd *cobra.Command, def output.Format, accepted ...output.Format) *output.Flag {
	o := output.NewFlag(def, accepted...)
	cmd.Flags().VarP(o, "output", "o", o.Usage())
	return o
}

// policyDirArg returns the POLICY_DIR argument or the default.
func policyDirArg(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return defaultPolicyDir
}

const defaultPolicyDir = "policies/lab"
