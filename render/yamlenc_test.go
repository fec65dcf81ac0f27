package render

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	goyaml "go.yaml.in/yaml/v2"
)

// sameAsYAMLv2 fails the test when yamlEncoder and yaml.v2 write obj
// differently.
func sameAsYAMLv2(t *testing.T, e *yamlEncoder, what string, obj map[string]any) {
	t.Helper()
	want, err := goyaml.Marshal(obj)
	if err != nil {
		t.Fatalf("%s: yaml.v2: %v", what, err)
	}
	got, err := e.marshal("# head\n", obj)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if string(got) != "# head\n"+string(want) {
		t.Errorf("%s: yamlEncoder wrote\n%s\nyaml.v2 writes\n# head\n%s", what, got, want)
	}
}

// TestYAMLEncoderIsYAMLv2 compares yamlEncoder with yaml.v2 on every
// object the policies in policies/ render to.
func TestYAMLEncoderIsYAMLv2(t *testing.T) {
	e := newYAMLEncoder()
	for _, o := range policiesObjects(t) {
		sameAsYAMLv2(t, e, o.what, o.u)
	}
}

// TestYAMLEncoderRandomDocuments compares yamlEncoder with yaml.v2 on
// generated documents: scalars yaml.v2 quotes, folds or writes as a
// literal block, keys it sorts by number, empty and nested collections,
// and what yamlEncoder leaves to yaml.v2 whole (floats, a sequence in a
// sequence, a key yaml.v2 quotes).
func TestYAMLEncoderRandomDocuments(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 80))
	pieces := []string{"a", "Z", "q-0001", "4Gi", "12.5Mi", "1024", "0", "1e3", "0x1F", "y", "no", "null", "~", "true",
		" ", "  ", "\n", "\t", ":", ": ", " #", "#", "-", "- ", "'", `"`, `\`, "{", "[", "]", "&", "*", "!", "|", ">", "%", "@", "`",
		"é", "日本", "\u2028", "\x7f", ".", "/", "_", "2001-12-14", "1:20", "<<",
		"gpupolicy.dev/policy", "a rather long sentence of words that will need folding when it passes eighty columns"}
	str := func() string {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	keys := []string{"apiVersion", "kind", "metadata", "spec", "a1", "a01", "a10", "a2", "b", "B", "_x", "x.y/z", "key-2", "key-10",
		"y", "1", "weird key", "queue-name", "a-very-long-key-name-that-is-still-plain-and-shorter-than-one-hundred-twenty-characters"}
	var val func(depth int, inSeq bool) any
	val = func(depth int, inSeq bool) any {
		k := rng.IntN(12)
		if depth >= 4 && k >= 8 {
			k = 0
		}
		switch k {
		case 0, 1, 2, 3:
			return str()
		case 4:
			return rng.Int64N(1<<40) - 1<<39
		case 5:
			return rng.IntN(2) == 0
		case 6:
			if rng.IntN(8) == 0 {
				return rng.Float64() * 100 // whole to yaml.v2
			}
			return nil
		case 7:
			var l []any
			for range rng.IntN(3) {
				l = append(l, val(depth+1, true))
			}
			if l == nil {
				return []any{}
			}
			if inSeq && rng.IntN(4) != 0 {
				return str() // a sequence in a sequence, now and then
			}
			return l
		default:
			m := map[string]any{}
			for range rng.IntN(4) {
				m[keys[rng.IntN(len(keys))]] = val(depth+1, false)
			}
			return m
		}
	}
	e := newYAMLEncoder()
	for i := range 3000 {
		doc := map[string]any{}
		for range 1 + rng.IntN(5) {
			doc[keys[rng.IntN(len(keys))]] = val(0, false)
		}
		sameAsYAMLv2(t, e, fmt.Sprint("document ", i), doc)
		if t.Failed() {
			return
		}
	}
}

// TestPlainYAML: what yamlEncoder writes itself is what yaml.v2 writes
// plain; what yaml.v2 quotes, it leaves to yaml.v2.
func TestPlainYAML(t *testing.T) {
	for s, want := range map[string]bool{
		"q-0001": true, "gpupolicy.dev/policy": true, "4Gi": true, "12.5Mi": true, "500m": true, "CREATE": true,
		"": false, "1024": false, "1e3": false, "12E": false, "y": false, "No": false, "null": false, "a b": false,
		"-a": false, ".5": false, "a:b": false, "é": false, "0x1F": false, "1.Gi": false,
	} {
		if got := plainYAML(s); got != want {
			t.Errorf("plainYAML(%q) = %v, want %v", s, got, want)
		}
		if want {
			b, err := goyaml.Marshal(map[string]any{"k": s})
			if err != nil || string(b) != "k: "+s+"\n" {
				t.Errorf("yaml.v2 writes %q as %q, not plain", s, b)
			}
		}
	}
}
