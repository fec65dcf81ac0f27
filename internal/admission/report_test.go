package admission

import (
	"slices"
	"testing"
)

// TestWrap: wrap breaks before the word that would take a line past the
// width, counted in runes (not bytes), collapses every run of white
// space to one space, and gives a word longer than the width a line of
// its own.
func TestWrap(t *testing.T) {
	for _, c := range []struct {
		in    string
		width int
		want  []string
	}{
		{"", 10, nil},
		{" \t\n ", 10, nil},
		{"one two three", 7, []string{"one two", "three"}},
		{"one two three", 6, []string{"one", "two", "three"}},
		{"one  two\tthree\nfour", 40, []string{"one two three four"}},
		// "ĝĝĝ ĝĝĝ" is 7 runes and 13 bytes: it fits 7.
		{"ĝĝĝ ĝĝĝ ĝ", 7, []string{"ĝĝĝ ĝĝĝ", "ĝ"}},
		{"a verylongwordindeed b", 5, []string{"a", "verylongwordindeed", "b"}},
		{"ab cd", 5, []string{"ab cd"}},
		{"ab cde", 5, []string{"ab", "cde"}},
	} {
		if got := wrap(c.in, c.width); !slices.Equal(got, c.want) {
			t.Errorf("wrap(%q, %d) = %q, want %q", c.in, c.width, got, c.want)
		}
	}
}
