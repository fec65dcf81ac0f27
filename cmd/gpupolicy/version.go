package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/output"
	"github.com/gpupolicy/gpupolicy/internal/version"
	"github.com/gpupolicy/gpupolicy/render/crdcheck"
)

func init() { commands = append(commands, newVersionCmd) }

func newVersionCmd() *cobra.Command {
	var o *output.Flag
	cmd := &cobra.Command{
		Use:   "version [-o text|json|yaml]",
		Short: "Print gpupolicy's version, the Kueue and Argo releases it targets and the CRDs it validates against",
		Long: `version prints gpupolicy's own version (set at build time, or the module
version go install recorded, or the commit it was built from), the Go
toolchain, the Kueue and Argo Workflows releases whose CRDs are embedded and
whose behaviour explain models, and every CRD group/version/kind render
validates objects against.

Output: -o text (default), json or yaml (the same document).`,
		Example: `  gpupolicy version
  gpupolicy version -o json

  # In CI: record which gpupolicy and which Kueue/Argo CRDs checked the change
  gpupolicy version -o json > gpupolicy-version.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := versionInfo()
			if err != nil {
				return err
			}
			return r.Write(cmd.OutOrStdout(), o.Format())
		},
	}
	o = outputFlag(cmd, output.Text, output.Text, output.JSON, output.YAML)
	return cmd
}

// versionReport is what version prints; its JSON keys are a contract.
type versionReport struct {
	Version string `json:"version"`
	Go      string `json:"go"`
	// Targets are the releases whose CRDs are embedded: module → version.
	Targets []versionTarget `json:"targets"`
	// KueueModel is the Kueue release explain's admission model transcribes.
	KueueModel string `json:"kueueModel"`
	// CRDs are the group/version/kinds render validates against.
	CRDs []versionCRD `json:"crds"`
}

type versionTarget struct {
	Name    string `json:"name"`
	Module  string `json:"module"`
	Version string `json:"version"`
}

type versionCRD struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

func versionInfo() (*versionReport, error) {
	r := &versionReport{Version: version.Tool(), Go: version.GoVersion(), KueueModel: admission.KueueVersion,
		Targets: []versionTarget{}, CRDs: []versionCRD{}}
	seen := map[string]bool{}
	for _, s := range crdcheck.Sources {
		if seen[s.Module] {
			continue
		}
		seen[s.Module] = true
		name := s.Module
		switch {
		case strings.Contains(s.Module, "kueue"):
			name = "Kueue"
		case strings.Contains(s.Module, "argo-workflows"):
			name = "Argo Workflows"
		case strings.Contains(s.Module, "fluxcd/source-controller"):
			name = "Flux source-controller"
		case strings.Contains(s.Module, "fluxcd/kustomize-controller"):
			name = "Flux kustomize-controller"
		case strings.Contains(s.Module, "argoproj/argo-cd"):
			name = "Argo CD"
		}
		r.Targets = append(r.Targets, versionTarget{Name: name, Module: s.Module, Version: s.Version})
	}
	v, err := crdcheck.New()
	if err != nil {
		return nil, err
	}
	for _, gvk := range v.Kinds() {
		r.CRDs = append(r.CRDs, versionCRD{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind})
	}
	return r, nil
}

// Write prints the report (output.Writer).
func (r *versionReport) Write(w io.Writer, f output.Format) error {
	return output.Write(w, f, r, r.text, nil)
}

func (r *versionReport) text(w io.Writer) error {
	fmt.Fprintf(w, "gpupolicy %s (go %s)\n", r.Version, r.Go)
	for _, t := range r.Targets {
		fmt.Fprintf(w, "targets %s %s (%s)\n", t.Name, t.Version, t.Module)
	}
	fmt.Fprintf(w, "admission model: kueue %s classical preemption\n", r.KueueModel)
	fmt.Fprintln(w, "validates against CRDs:")
	for _, c := range r.CRDs {
		fmt.Fprintf(w, "  %s/%s %s\n", c.Group, c.Version, c.Kind)
	}
	return nil
}
