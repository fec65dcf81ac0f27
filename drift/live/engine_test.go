package live

import (
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/environment"
)

func TestSyncedCommit(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	for raw, want := range map[string]string{
		"main@sha1:" + sha:              sha, // Flux v1, branch ref
		"sha1:" + sha:                   sha, // Flux v1, commit ref
		"refs/tags/v1@sha1:" + sha:      sha,
		"main/" + sha:                   sha, // Flux before v1
		sha:                             sha, // Argo CD
		"":                              "",
		"main@sha256:" + sha + sha[:24]: sha + sha[:24],
		"not a revision":                "",
	} {
		if got := SyncedCommit(raw); got != want {
			t.Errorf("SyncedCommit(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestEngineFindings(t *testing.T) {
	const pin, old = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	e := &Engine{Engine: environment.EngineFlux, Object: "Kustomization flux-system/gpupolicy-lab", Source: "GitRepository flux-system/gpupolicy-lab",
		Found: true, Pin: pin, Wants: pin, SyncedRaw: "main@sha1:" + pin, Synced: pin, env: "lab"}
	if fs := e.Findings(); len(fs) != 0 {
		t.Fatalf("on the pin: %v", fs)
	}
	e.Wants, e.SyncedRaw, e.Synced = old, "sha1:"+old, old
	fs := e.Findings()
	if len(fs) != 2 || fs[0].Rule != "engine-stale" || fs[1].Rule != "engine-off-pin" {
		t.Fatalf("off the pin: %v", fs)
	}
	if !strings.Contains(fs[1].Message, "the cluster runs deploy/lab at 2222222") || !strings.Contains(fs[1].Message, "not the pin 1111111") {
		t.Errorf("engine-off-pin: %s", fs[1].Message)
	}
	e.Found = false
	if fs := e.Findings(); len(fs) != 1 || fs[0].Rule != "engine-missing" || !strings.Contains(fs[0].Message, "kubectl apply -f environments/lab/gitops/") {
		t.Errorf("missing: %v", fs)
	}
}
