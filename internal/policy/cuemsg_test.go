package policy

import "testing"

func TestConstraintWords(t *testing.T) {
	for in, want := range map[string]string{
		"int & >=1 & <=64":                   "an integer from 1 to 64",
		"*1 | (int & >=1 & <=64)":            "an integer from 1 to 64 (default 1)",
		"int & >0 & <=31536000":              "an integer from 1 to 31536000",
		`"always-on" | "on-demand"`:          `one of "always-on", "on-demand"`,
		`*"Never" | "LowerPriority" | "Any"`: `one of "Never", "LowerPriority", "Any" (default "Never")`,
		"string & strings.MinRunes(1)":       "a string, not empty",
		"*false | bool":                      "true or false (default false)",
		"[...string]":                        "a list, each element a string",
	} {
		if got := constraintWords(in); got != want {
			t.Errorf("constraintWords(%q) = %q, want %q", in, got, want)
		}
	}
	if got := constraintWords("#HostMemory"); got == "#HostMemory" || got == "" {
		t.Errorf("constraintWords(#HostMemory) = %q, want the definition's doc", got)
	}
}

func TestClosest(t *testing.T) {
	known := []string{"mode", "namespace", "queue", "priority", "description"}
	for in, want := range map[string]string{
		"mdoe": "mode", "prioirty": "priority", "descripton": "description", "colour": "", "x": "",
	} {
		if got := closest(in, known); got != want {
			t.Errorf("closest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormalizeLineEndings(t *testing.T) {
	got := normalizeLineEndings(map[string][]byte{"a.cue": []byte("a\rb\r\nc\n")})
	if string(got["a.cue"]) != "a\nb\nc\n" {
		t.Errorf("normalizeLineEndings = %q", got["a.cue"])
	}
}
