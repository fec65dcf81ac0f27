package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseLevels(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{"1,2,3,4,5", []int{1, 2, 3, 4, 5}, ""},
		{"1-5", []int{1, 2, 3, 4, 5}, ""},
		{"1-3, 5", []int{1, 2, 3, 5}, ""},
		{"4", []int{4}, ""},
		{"0", nil, "use 1 to 64"},
		{"x", nil, "not a number"},
		{"5-1", nil, "bad range"},
		{"", nil, "no level"},
	} {
		got, err := parseLevels(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseLevels(%q) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseLevels(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestVerifyUsage: usage errors and an unreachable cluster exit 2 with a
// message, before anything is submitted.
func TestVerifyUsage(t *testing.T) {
	dir := t.TempDir()
	unreachable := filepath.Join(dir, "kubeconfig")
	// A cluster on a port nothing listens on.
	if err := os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: nobody
  user: {token: x}
contexts:
- name: nowhere
  context: {cluster: nowhere, user: nobody}
current-context: nowhere
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verify"}, "--env ENV is required"},
		{[]string{"verify", "--env", "local", "-o", "xml"}, `unknown output format "xml": use text, json, yaml or markdown`},
		{[]string{"verify", "--env", "local", "--levels", "0"}, "use 1 to 64"},
		{[]string{"verify", "--env", "local", "--batches", "0"}, "--batches 0"},
		{[]string{"verify", "--env", "local", "--exclusive-template", "vllm-bench"}, "give --exclusive too"},
		{[]string{"verify", "--env", "nosuch"}, `no environment "nosuch"`},
		{[]string{"verify", "--env", "local", "--kubeconfig", filepath.Join(dir, "absent")}, "make cluster-up"},
		// A flag the policy refuses is reported before the cluster is
		// looked at: no kubeconfig here, and the message is the name's.
		{[]string{"verify", "--env", "local", "--kubeconfig", filepath.Join(dir, "absent"), "--exclusive", "--exclusive-template", "nope"},
			`verify --exclusive-template "nope": not an exclusive template of the policy (exclusive: vllm-bench)`},
		{[]string{"verify", "--env", "local", "--kubeconfig", unreachable, "--levels", "1", "--batches", "1"}, "127.0.0.1:1"},
		{[]string{"verify", "--env", "local", "--compare-with", "no-such-revision-or-dir"}, `--compare-with "no-such-revision-or-dir": neither a policy directory nor a revision`},
		{[]string{"verify", "--env", "local", "--compare-with", dir}, "no .cue files"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != exitInput || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q, want nothing", tc.args, stdout.String())
		}
	}
}
