package policy_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// TestFieldBesideTheEmbedding: CUE allows the fields declared next to an
// embedded definition, so the policy's package alone (what cue export
// reads) accepts, in the file that embeds schema.#Policy, a field the
// schema lacks, at the top or nested. Load unifies the package with #Policy
// and refuses it at its position; its fast path leaves it to the checked
// path, and takes the lab.
func TestFieldBesideTheEmbedding(t *testing.T) {
	lab := labFiles(t)
	if !policy.EvalChecked(lab) {
		t.Error("the lab does not take LoadFiles' fast path")
	}
	line := bytes.Count(lab["policy.cue"], []byte("\n")) + 1
	for extra, want := range map[string]string{
		"bogus: 1\n": "lab/policy.cue:" + strconv.Itoa(line) + ":1: schema: bogus: field not allowed",
		`cards: "rtx-5060-ti": colour: "red"` + "\n": "lab/policy.cue:" + strconv.Itoa(line) + `:23: schema: cards."rtx-5060-ti".colour: field not allowed`,
	} {
		files := map[string][]byte{}
		for n, b := range lab {
			files[n] = b
		}
		files["policy.cue"] = append(append([]byte{}, lab["policy.cue"]...), extra...)
		if policy.EvalChecked(files) {
			t.Errorf("%q: the fast path takes a policy with a field the schema lacks", extra)
		}
		_, err := policy.LoadFiles(files, func(n string) string { return "lab/" + n })
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: Load = %v, want %s", extra, err, want)
		}
	}
}

// TestReleaseSource: after ReleaseSource a policy gives every position it
// gave before (the policy evaluated again on the first Pos), and so does a
// copy made before the release (copies share the source); the checked
// path's policy keeps its value.
func TestReleaseSource(t *testing.T) {
	paths := [][]string{
		{"templates"}, {"templates", "gpu-step", "queue"}, {"queues", "gpu-general", "cohort"},
		{"cards", "rtx-5060-ti", "shares"}, {"services"}, {"no-such-field"}, {"queues", "gpu-general", "nope", "deeper"},
	}
	p, err := policy.Load("../../policies/lab")
	if err != nil {
		t.Fatal(err)
	}
	before := make([]string, len(paths))
	for i, path := range paths {
		before[i] = p.Pos(path...)
		if before[i] == "" {
			t.Fatalf("no position for %v", path)
		}
	}
	if before[1] == before[0] || !strings.HasPrefix(before[1], "../../policies/lab/") {
		t.Fatalf("templates.gpu-step.queue at %s, templates at %s", before[1], before[0])
	}
	cp := *p
	p.ReleaseSource()
	for i, path := range paths {
		if got := p.Pos(path...); got != before[i] {
			t.Errorf("after release, %v at %s, want %s", path, got, before[i])
		}
		if got := cp.Pos(path...); got != before[i] {
			t.Errorf("a copy, after release, %v at %s, want %s", path, got, before[i])
		}
	}
	if d := policy.SameLoad(p, &cp); d != "" {
		t.Error(d)
	}
}

// TestNodeLabelsKubernetesRefuses: a card's nodeLabels key or value that
// Kueue's ResourceFlavor webhook refuses (metav1 validation.ValidateLabels)
// is refused by vet at the label, with rule node-labels; the lab's own
// label (a prefixed key, a value of letters, digits and dashes) passes.
func TestNodeLabelsKubernetesRefuses(t *testing.T) {
	const good = `nodeLabels: "nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-5060-Ti-SHARED"`
	lab := labFiles(t)
	if !bytes.Contains(lab["policy.cue"], []byte(good)) {
		t.Fatal("the lab's policy.cue no longer has its nodeLabels line")
	}
	for bad, want := range map[string]string{
		`nodeLabels: "bad key!!": "x"`:                            `lab/policy.cue:21:27: node-labels: card "rtx-5060-ti": nodeLabels "bad key!!": Invalid value: "bad key!!": name part must consist of alphanumeric characters`,
		`nodeLabels: "nvidia.com/gpu.product": "RTX 5060 Ti / x"`: `lab/policy.cue:21:40: node-labels: card "rtx-5060-ti": nodeLabels "nvidia.com/gpu.product": Invalid value: "RTX 5060 Ti / x": a valid label must be an empty string or consist of alphanumeric characters`,
	} {
		files := map[string][]byte{}
		for n, b := range lab {
			files[n] = b
		}
		files["policy.cue"] = bytes.Replace(lab["policy.cue"], []byte(good), []byte(bad), 1)
		_, err := policy.LoadFiles(files, func(n string) string { return "lab/" + n })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v\nwant %s", bad, err, want)
		}
	}
}
