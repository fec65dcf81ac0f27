package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/drift/live"
	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/output"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// runLiveDrift is drift --live: git's report r extended with the cluster
// against the pin and the Workloads check (live.Check).
func runLiveDrift(cmd *cobra.Command, t *envTarget, git *drift.Report, cf clusterFlags, format output.Format) error {
	ctx := cmd.Context()
	pinned, _, err := t.Pinned(ctx)
	if err != nil {
		return err
	}
	c, where, err := cf.clients(t)
	if err != nil {
		return err
	}
	p, err := environment.PolicyAt(t.Repo, git.Pin.Commit.Hash, t.Env.Policy)
	if err != nil {
		return fmt.Errorf("the policy at the pin: %w", err)
	}
	side := &live.Side{Client: c.Dynamic, Mapper: c.Mapper, Pinned: pinned, Owner: ownerLabels(t.Env.Name), Name: live.Sides.To, Where: where, Kinds: contract.RenderedKinds}
	if ref := t.Env.Engine(); ref.Engine != environment.EngineNone {
		side.Engine = &live.EngineTarget{EngineRef: ref, Env: t.Env.Name, Pin: git.Pin.Commit.Hash,
			Compare: func(ctx context.Context, rev string) (*drift.Report, error) {
				return t.CompareWithPin(ctx, rev, live.EngineSides)
			}}
	}
	r, err := live.Check(ctx, side, git, p)
	if err != nil {
		return err
	}
	for _, kind := range side.Unlisted {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %s may not list %s objects; an owned %s the pin no longer renders would not show as extra\n", where, kind, kind)
	}
	if output.IsCI(format) {
		err = writeCI(cmd, format, ciRun("drift", finding.Rules(finding.Drift), r.Findings()))
	} else {
		err = r.Write(cmd.OutOrStdout(), format)
	}
	if err != nil {
		return err
	}
	if r.Drifted() {
		return findingsError{}
	}
	return nil
}
