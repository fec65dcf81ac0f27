package output

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestParse(t *testing.T) {
	for _, f := range All {
		got, err := Parse(string(f))
		if err != nil || got != f {
			t.Errorf("Parse(%q) = %q, %v", f, got, err)
		}
	}
	if f, err := Parse("json", Text, JSON); err != nil || f != JSON {
		t.Errorf("Parse(json, text|json) = %q, %v", f, err)
	}
	for _, bad := range []string{"", "md", "JSON", "yml", "html"} {
		_, err := Parse(bad, Text, JSON, Markdown)
		var u *ErrUnknown
		if !errors.As(err, &u) {
			t.Fatalf("Parse(%q): %v, want an ErrUnknown", bad, err)
		}
		if want := `unknown output format "` + bad + `": use text, json or markdown`; err.Error() != want {
			t.Errorf("Parse(%q): %q, want %q", bad, err, want)
		}
	}
	if _, err := Parse("yaml", Text, JSON); err == nil || err.Error() != `unknown output format "yaml": use text or json` {
		t.Errorf("yaml where only text and json are accepted: %v", err)
	}
}

func TestList(t *testing.T) {
	cases := map[string][]Format{"": nil, "text": {Text}, "text or json": {Text, JSON}, "text, json, yaml or markdown": All}
	for want, fs := range cases {
		if got := List(fs); got != want {
			t.Errorf("List(%v) = %q, want %q", fs, got, want)
		}
	}
}

func TestFlag(t *testing.T) {
	o := NewFlag(Markdown, Markdown, JSON, Text)
	if o.Format() != Markdown || o.String() != "markdown" || o.Type() != "format" {
		t.Errorf("default: %q %q %q", o.Format(), o.String(), o.Type())
	}
	if o.Usage() != "output format: markdown, json or text" {
		t.Errorf("Usage() = %q", o.Usage())
	}
	if err := o.Set("json"); err != nil || o.Format() != JSON {
		t.Errorf("Set(json): %v, %q", err, o.Format())
	}
	if err := o.Set("yaml"); err == nil || o.Format() != JSON {
		t.Errorf("Set(yaml) = %v, format %q: want an error and the format kept", err, o.Format())
	}
	if got := NewFlag(Text).Accepted(); len(got) != len(All) {
		t.Errorf("NewFlag without formats accepts %v, want all", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("a default the flag does not accept did not panic")
		}
	}()
	NewFlag(YAML, Text, JSON)
}

func TestWriteJSONAndYAML(t *testing.T) {
	v := struct {
		Rule    string   `json:"rule"`
		Message string   `json:"message"`
		Empty   []string `json:"empty"`
	}{"lock-capacity", "main lock (4) > 0 & <1", []string{}}
	var j, y bytes.Buffer
	if err := WriteJSON(&j, v); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"rule\": \"lock-capacity\",\n  \"message\": \"main lock (4) > 0 & <1\",\n  \"empty\": []\n}\n"; j.String() != want {
		t.Errorf("WriteJSON:\n%s\nwant\n%s", j.String(), want)
	}
	if err := WriteYAML(&y, v); err != nil {
		t.Fatal(err)
	}
	if want := "empty: []\nmessage: main lock (4) > 0 & <1\nrule: lock-capacity\n"; y.String() != want {
		t.Errorf("WriteYAML:\n%s\nwant\n%s", y.String(), want)
	}
}

func TestWrite(t *testing.T) {
	text := func(w io.Writer) error { _, err := io.WriteString(w, "text\n"); return err }
	md := func(w io.Writer) error { _, err := io.WriteString(w, "# md\n"); return err }
	doc := map[string]int{"jobs": 4}
	want := map[Format]string{Text: "text\n", Markdown: "# md\n", JSON: "{\n  \"jobs\": 4\n}\n", YAML: "jobs: 4\n"}
	for f, w := range want {
		var b bytes.Buffer
		if err := Write(&b, f, doc, text, md); err != nil || b.String() != w {
			t.Errorf("Write(%s) = %q, %v; want %q", f, b.String(), err, w)
		}
	}
	var b bytes.Buffer
	if err := Write(&b, Markdown, doc, text, nil); err == nil || err.Error() != `unknown output format "markdown": use text, json or yaml` {
		t.Errorf("markdown without a markdown writer: %v", err)
	}
}
