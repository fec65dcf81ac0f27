// Package output is the one home of the report formats a verb prints with
// -o (text, json, yaml, markdown), of their one validator, and of the
// interface reports implement to be printed.
package output

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// Format is a report format.
type Format string

// The formats: text for a terminal, json and yaml for machines, markdown
// for a pull-request comment or a scheduled report.
const (
	Text     Format = "text"
	JSON     Format = "json"
	YAML     Format = "yaml"
	Markdown Format = "markdown"
)

// All lists every format.
var All = []Format{Text, JSON, YAML, Markdown}

// Writer is a report: it writes itself in a format. Write is only called
// with a format the verb accepts (Flag validates it); JSON and YAML can be
// written with WriteJSON and WriteYAML.
type Writer interface {
	Write(w io.Writer, f Format) error
}

// ErrUnknown is a format a verb does not accept.
type ErrUnknown struct {
	Got      string
	Accepted []Format
}

func (e *ErrUnknown) Error() string {
	return fmt.Sprintf("unknown output format %q: use %s", e.Got, List(e.Accepted))
}

// Parse validates s against the formats a verb accepts (All when none is
// given): the one validator of -o.
func Parse(s string, accepted ...Format) (Format, error) {
	if len(accepted) == 0 {
		accepted = All
	}
	for _, f := range accepted {
		if string(f) == s {
			return f, nil
		}
	}
	return "", &ErrUnknown{Got: s, Accepted: accepted}
}

// List is "text, json or markdown".
func List(fs []Format) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Flag is the value of a verb's -o flag: the format, validated when the flag
// is set (a bad value is a flag error: usage, exit 2). It is a pflag.Value:
//
//	o := output.NewFlag(output.Text, output.Text, output.JSON)
//	cmd.Flags().VarP(o, "output", "o", o.Usage())
type Flag struct {
	f        Format
	accepted []Format
}

// NewFlag is a flag with a default and the formats the verb accepts (the
// default among them; All when none is given).
func NewFlag(def Format, accepted ...Format) *Flag {
	if len(accepted) == 0 {
		accepted = All
	}
	if _, err := Parse(string(def), accepted...); err != nil {
		panic("output: default " + err.Error())
	}
	return &Flag{f: def, accepted: accepted}
}

// Format is the chosen format.
func (o *Flag) Format() Format { return o.f }

// Accepted lists the formats the verb accepts.
func (o *Flag) Accepted() []Format { return o.accepted }

// Usage is the flag's help line: "output format: text, json or markdown".
func (o *Flag) Usage() string { return "output format: " + List(o.accepted) }

func (o *Flag) String() string { return string(o.f) }

// Set validates and sets the format.
func (o *Flag) Set(s string) error {
	f, err := Parse(s, o.accepted...)
	if err != nil {
		return err
	}
	o.f = f
	return nil
}

// Type names the value in help: "format".
func (o *Flag) Type() string { return "format" }

// Write writes a report in format f: JSON and YAML are doc's JSON (the
// report's document, whose keys are its contract), text and markdown are
// written by the report's own functions, through a buffer (a report
// writes line by line; unbuffered, each line was a system call on
// stdout). A report's Write method is usually one call to it.
func Write(w io.Writer, f Format, doc any, text, markdown func(io.Writer) error) error {
	switch f {
	case JSON:
		return WriteJSON(w, doc)
	case YAML:
		return WriteYAML(w, doc)
	case Markdown:
		if markdown != nil {
			return buffered(w, markdown)
		}
	case Text:
		if text != nil {
			return buffered(w, text)
		}
	}
	return &ErrUnknown{Got: string(f), Accepted: offered(text, markdown)}
}

// buffered runs write on a buffer over w and flushes what it wrote, also
// when it fails; its error first.
func buffered(w io.Writer, write func(io.Writer) error) error {
	b := bufio.NewWriterSize(w, 64<<10)
	err := write(b)
	if ferr := b.Flush(); err == nil {
		err = ferr
	}
	return err
}

func offered(text, markdown func(io.Writer) error) []Format {
	var out []Format
	if text != nil {
		out = append(out, Text)
	}
	out = append(out, JSON, YAML)
	if markdown != nil {
		out = append(out, Markdown)
	}
	return out
}

// WriteJSON writes v as indented JSON with a trailing newline, HTML left
// unescaped (messages quote <, > and &). Map keys are sorted, so equal
// values give equal bytes. A struct is written as it is encoded, field by
// field and a slice field element by element (jsonstream.go): the bytes
// of json.Encoder, without holding the whole document. On an error
// (a value JSON cannot encode) w may have a part of it.
func WriteJSON(w io.Writer, v any) error {
	return streamJSON(w, v)
}

// WriteYAML writes v as YAML: its JSON (the same keys and values, so the
// same contract), converted.
func WriteYAML(w io.Writer, v any) error {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, v); err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(buf.Bytes())
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}
