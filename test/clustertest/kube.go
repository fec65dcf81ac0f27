package clustertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Condition returns the status ("True", "False", "Unknown") and reason of
// the status condition typ of obj, or "", "" when obj has none.
func Condition(obj *unstructured.Unstructured, typ string) (status, reason string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		s, _ := m["status"].(string)
		r, _ := m["reason"].(string)
		return s, r
	}
	return "", ""
}

// ConditionTrue reports whether obj's status condition typ is "True".
func ConditionTrue(obj *unstructured.Unstructured, typ string) bool {
	s, _ := Condition(obj, typ)
	return s == "True"
}

// PollInterval is how often Poll and WaitFor ask again.
const PollInterval = 250 * time.Millisecond

// Fatal wraps an error that ends a Poll or WaitFor at once, without waiting
// for the deadline (a state the awaited one can no longer follow).
type Fatal struct{ Err error }

func (f Fatal) Error() string { return f.Err.Error() }
func (f Fatal) Unwrap() error { return f.Err }

// Poll calls cond every PollInterval until it returns true, returns a Fatal
// error, or ctx ends. The error names what was awaited and the last error
// cond returned.
func Poll(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
			var f Fatal
			if errors.As(err, &f) {
				return fmt.Errorf("waiting for %s: %w", what, f.Err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), last)
		case <-time.After(PollInterval):
		}
	}
}

// WaitFor is Poll for a test: it fails the test when the wait fails and
// logs how long a successful one took.
func WaitFor(t testing.TB, ctx context.Context, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	start := time.Now()
	if err := Poll(ctx, what, cond); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s after %s", what, time.Since(start).Round(100*time.Millisecond))
}
