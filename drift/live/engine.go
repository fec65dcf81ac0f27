package live

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gpupolicy/gpupolicy/drift"
	"github.com/gpupolicy/gpupolicy/internal/environment"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// The rules drift --live applies to the GitOps engine that syncs the
// environment.
var (
	RuleEngineMissing = finding.Register(finding.Rule{ID: "engine-missing", Verb: finding.Drift, Severity: finding.Error,
		Reason: "environment.yaml names a GitOps engine but the cluster has no object of it for the environment: nothing syncs deploy/ENV at the pin"})
	RuleEngineStale = finding.Register(finding.Rule{ID: "engine-stale", Verb: finding.Drift, Severity: finding.Error,
		Reason: "the engine's object on the cluster asks for a commit other than the pin: environments/ENV/gitops was not applied after the pin moved, so the engine keeps syncing the old commit"})
	RuleEngineOffPin = finding.Register(finding.Rule{ID: "engine-off-pin", Verb: finding.Drift, Severity: finding.Error,
		Reason: "the GitOps engine last applied a commit other than the pin: the cluster runs what that commit renders (the stale pin that dropped every GPU-memory declaration, seen from the cluster)"})
)

// EngineTarget is what drift --live checks of the GitOps engine: its
// object, the pin it should sync, and how to compare a synced commit's
// render with the pin's.
type EngineTarget struct {
	environment.EngineRef
	// Env is the environment's name; Pin, the full SHA it is pinned to.
	Env, Pin string
	// Compare compares the render at rev (From) with the render at the pin
	// (To), as drift does between the pin and HEAD.
	Compare func(ctx context.Context, rev string) (*drift.Report, error)
}

// EngineSides name the two ends of the synced-commit comparison.
var EngineSides = drift.Sides{From: "the synced commit", To: "the pin"}

// Engine is what the cluster's GitOps engine runs.
type Engine struct {
	Engine string `json:"engine"`
	// Object is the object read for the synced revision
	// ("Kustomization flux-system/gpupolicy-lab"); Source, the one whose
	// spec names the commit (the GitRepository for Flux; the Application
	// itself for Argo CD).
	Object string `json:"object"`
	Source string `json:"source"`
	// Found is false when the cluster lacks either object (or their CRDs).
	Found bool   `json:"found"`
	Pin   string `json:"pin"`
	// Wants is the commit the engine's spec asks for (Flux
	// spec.ref.commit, Argo CD spec.source.targetRevision).
	Wants string `json:"wants"`
	// SyncedRaw is the revision the engine reports having applied, as it
	// writes it (Flux status.lastAppliedRevision "main@sha1:<sha>", Argo CD
	// status.sync.revision); Synced is its commit SHA; both empty when it
	// has applied nothing yet.
	SyncedRaw string `json:"syncedRaw"`
	Synced    string `json:"synced"`
	// Lacks compares the render at Synced with the render at the pin: what
	// the cluster lacks of the pin. Nil when Synced is the pin or unknown;
	// LacksError says why it could not be compared.
	Lacks      *drift.Report `json:"lacks,omitempty"`
	LacksError string        `json:"lacksError,omitempty"`

	env string
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// SyncedCommit extracts the commit SHA from a revision as the engines
// write it: Flux v1 "main@sha1:<sha>", "sha1:<sha>" (a commit ref), the
// legacy "main/<sha>", or Argo CD's bare "<sha>". It returns "" for
// anything else.
func SyncedCommit(raw string) string {
	s := strings.TrimSpace(raw)
	if i := strings.LastIndex(s, "@"); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.Index(s, ":"); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.LastIndex(s, "/"); i >= 0 {
		s = s[i+1:]
	}
	if !shaRE.MatchString(s) {
		return ""
	}
	return s
}

// ReadEngine reads the engine's objects (get only) and, when the engine
// runs a commit other than the pin, compares the two renders.
func ReadEngine(ctx context.Context, client dynamic.Interface, t EngineTarget) (*Engine, error) {
	e := &Engine{Engine: t.Engine, Pin: t.Pin, env: t.Env}
	get := func(gvr schema.GroupVersionResource) (*unstructured.Unstructured, error) {
		u, err := client.Resource(gvr).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return u, err
	}
	var wantsObj, syncedObj *unstructured.Unstructured
	var err error
	switch t.Engine {
	case environment.EngineFlux:
		e.Source = fmt.Sprintf("GitRepository %s/%s", t.Namespace, t.Name)
		e.Object = fmt.Sprintf("Kustomization %s/%s", t.Namespace, t.Name)
		if wantsObj, err = get(contract.GVRFluxGitRepository); err != nil {
			return nil, fmt.Errorf("reading %s: %w", e.Source, err)
		}
		if syncedObj, err = get(contract.GVRFluxKustomization); err != nil {
			return nil, fmt.Errorf("reading %s: %w", e.Object, err)
		}
		if wantsObj != nil {
			e.Wants, _, _ = unstructured.NestedString(wantsObj.Object, "spec", "ref", "commit")
		}
		if syncedObj != nil {
			e.SyncedRaw, _, _ = unstructured.NestedString(syncedObj.Object, "status", "lastAppliedRevision")
		}
	case environment.EngineArgoCD:
		e.Object = fmt.Sprintf("Application %s/%s", t.Namespace, t.Name)
		e.Source = e.Object
		if syncedObj, err = get(contract.GVRArgoCDApplication); err != nil {
			return nil, fmt.Errorf("reading %s: %w", e.Object, err)
		}
		wantsObj = syncedObj
		if syncedObj != nil {
			e.Wants, _, _ = unstructured.NestedString(syncedObj.Object, "spec", "source", "targetRevision")
			e.SyncedRaw, _, _ = unstructured.NestedString(syncedObj.Object, "status", "sync", "revision")
		}
	default:
		return nil, nil
	}
	e.Found = wantsObj != nil && syncedObj != nil
	e.Synced = SyncedCommit(e.SyncedRaw)
	if !e.Found || e.Synced == "" || sameCommit(e.Synced, t.Pin) || t.Compare == nil {
		return e, nil
	}
	r, err := t.Compare(ctx, e.Synced)
	switch {
	case drift.IsUnknownRevision(err):
		e.LacksError = fmt.Sprintf("%s names no commit of this repository (fetch it, or the engine syncs another repository)", gitrepo.Short(e.Synced))
	case err != nil:
		e.LacksError = err.Error()
	default:
		e.Lacks = r
	}
	return e, nil
}

// sameCommit compares a possibly abbreviated SHA with a full one.
func sameCommit(a, full string) bool {
	return a != "" && full != "" && strings.HasPrefix(full, a)
}

// Findings are the engine's findings: engine-missing, engine-stale,
// engine-off-pin.
func (e *Engine) Findings() finding.List {
	if e == nil {
		return nil
	}
	var out finding.List
	gitops := environment.GitOpsDir(e.env)
	if !e.Found {
		f := RuleEngineMissing.New(fmt.Sprintf("environment %s names %s, but the cluster has no %s: nothing syncs %s at the pin; apply %s (kubectl apply -f %s/)",
			e.env, e.Engine, e.missing(), environment.DeployDir(e.env), gitops, gitops))
		f.Object = e.Object
		return append(out, f)
	}
	if !sameCommit(e.Wants, e.Pin) {
		f := RuleEngineStale.New(fmt.Sprintf("%s asks for %s, not the pin %s: apply %s (kubectl apply -f %s/) so the engine follows the pin",
			e.Source, valueOr(gitrepo.Short(e.Wants), "no commit"), gitrepo.Short(e.Pin), gitops, gitops))
		f.Object = e.Source
		out = append(out, f)
	}
	if msg := e.offPin(); msg != "" {
		f := RuleEngineOffPin.New(msg)
		f.Object = e.Object
		out = append(out, f)
	}
	return out
}

func (e *Engine) missing() string {
	if e.Source != e.Object {
		return e.Source + " and " + e.Object
	}
	return e.Object
}

// offPin says how the synced commit differs from the pin ("" when it is
// the pin).
func (e *Engine) offPin() string {
	field := map[string]string{environment.EngineFlux: "status.lastAppliedRevision", environment.EngineArgoCD: "status.sync.revision"}[e.Engine]
	switch {
	case e.Synced == "" && e.SyncedRaw == "":
		return fmt.Sprintf("%s has applied nothing yet (no %s): the cluster does not run the pin %s", e.Object, field, gitrepo.Short(e.Pin))
	case e.Synced == "":
		return fmt.Sprintf("%s reports %s %q, which names no commit: the cluster may not run the pin %s", e.Object, field, e.SyncedRaw, gitrepo.Short(e.Pin))
	case sameCommit(e.Synced, e.Pin):
		return ""
	}
	what := ""
	switch {
	case e.LacksError != "":
		what = "; " + e.LacksError
	case e.Lacks != nil && !e.Lacks.Drifted():
		what = "; its render matches the pin's, so the cluster runs the same objects"
	case e.Lacks != nil:
		what = fmt.Sprintf("; the render there differs from the pin's in %d field(s) of %d object(s), listed below", len(e.Lacks.Differences), drift.CountObjects(e.Lacks.Differences))
	}
	return fmt.Sprintf("the cluster runs %s at %s (%s %s = %q), not the pin %s%s",
		environment.DeployDir(e.env), gitrepo.Short(e.Synced), e.Object, field, e.SyncedRaw, gitrepo.Short(e.Pin), what)
}

func valueOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
