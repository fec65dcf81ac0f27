package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// TestSchemaMessages checks the words of schema errors that name what the
// user meant: Kueue v1beta1's flavorFungibility words with their v1beta2
// name, and a struct-typed field given a scalar with the struct's whole
// shape (its declaration opens a block on its line).
func TestSchemaMessages(t *testing.T) {
	cases := map[string]struct {
		file, from, to string // an edit of a lab file, or a file x.cue when from is ""
		pos, msg       string
	}{
		"v1beta1 Borrow": {
			file: "x.cue", to: "queues: \"gpu-general\": flavorFungibility: whenCanBorrow: \"Borrow\"\n",
			pos: "x.cue:2:58",
			msg: `queues."gpu-general".flavorFungibility.whenCanBorrow: "Borrow" is Kueue v1beta1's word, which v1beta2 (the API gpupolicy renders) calls "MayStopSearch"; the schema: whenCanBorrow is one of "MayStopSearch", "TryNextFlavor" (default "MayStopSearch")`,
		},
		"v1beta1 Preempt": {
			file: "x.cue", to: "queues: \"gpu-general\": flavorFungibility: whenCanPreempt: \"Preempt\"\n",
			pos: "x.cue:2:59",
			msg: `queues."gpu-general".flavorFungibility.whenCanPreempt: "Preempt" is Kueue v1beta1's word, which v1beta2 (the API gpupolicy renders) calls "MayStopSearch"; the schema: whenCanPreempt is one of "TryNextFlavor", "MayStopSearch" (default "TryNextFlavor")`,
		},
		"a v1beta2 word misspelt stays a choice": {
			file: "x.cue", to: "queues: \"gpu-general\": flavorFungibility: whenCanBorrow: \"TryNext\"\n",
			pos: "x.cue:2:58",
			msg: `queues."gpu-general".flavorFungibility.whenCanBorrow: "TryNext" matches none of the schema's choices; the schema: whenCanBorrow is one of`,
		},
		"exclusive: true": {
			file: "templates.cue", from: `exclusive: jobs: "evict"`, to: "exclusive: true",
			pos: "templates.cue:57:13",
			msg: `templates."vllm-bench".exclusive: conflicting values true and {jobs:("wait"|"evict")} (mismatched types bool and struct); the schema: exclusive is a struct {jobs: "wait" | "evict"}`,
		},
		"nodes: 3": {
			file: "x.cue", to: "cards: \"rtx-5060-ti\": nodes: 3\n",
			msg: `the schema: nodes is a struct {selector?: string & strings.MinRunes(1), cardsPerNode: *1 | (int & >=1 & <=64)}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			files := labFiles(t)
			if tc.from == "" {
				files[tc.file] = []byte("package lab\n" + tc.to)
			} else {
				src := strings.Replace(string(files[tc.file]), tc.from, tc.to, 1)
				if src == string(files[tc.file]) {
					t.Fatalf("%q is not in %s", tc.from, tc.file)
				}
				files[tc.file] = []byte(src)
			}
			_, err := policy.LoadFiles(files, func(n string) string { return n })
			var ds finding.List
			if !errors.As(err, &ds) {
				t.Fatalf("load: %v, want findings", err)
			}
			for _, f := range ds {
				if f.Rule == policy.RuleSchema.ID && strings.HasPrefix(f.Message, tc.msg) && (tc.pos == "" || f.Pos == tc.pos) ||
					f.Rule == policy.RuleSchema.ID && tc.pos == "" && strings.HasSuffix(f.Message, tc.msg) {
					return
				}
			}
			t.Errorf("no schema finding at %s with %q; got:\n%v", tc.pos, tc.msg, ds)
		})
	}
}
