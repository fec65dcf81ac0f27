package output

import (
	"bufio"
	"bytes"
	"encoding"
	"encoding/json"
	"io"
	"reflect"
	"strings"
)

// JSON is written as it is encoded, not built whole first: WriteJSON
// encodes a struct one field at a time, and a slice field one element at a
// time, so what it holds beyond the value is one element's encoding, not
// the document's (explain's 7 MB document of a 1,000-queue policy was
// built three times over: encoded, indented, then written). The bytes are
// json.Encoder's with SetIndent("", "  ") and SetEscapeHTML(false): each
// part is encoded by such an encoder with the prefix of its depth (JSON's
// encoding of a value does not depend on where it stands, and Indent puts
// each nested line at prefix + indent × depth). A value whose encoding
// streamJSON cannot lay out field by field exactly as encoding/json does
// (not a struct, a struct or slice with its own MarshalJSON or
// MarshalText, an embedded field, a tag option other than omitempty, two
// fields of one name) is encoded whole.

const jsonIndent = "  "

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// marshalsItself reports whether encoding/json encodes t (or *t) by its
// own method rather than by its fields or elements.
func marshalsItself(t reflect.Type) bool {
	return t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler)
}

// jsonField is one field encoding/json writes of a struct.
type jsonField struct {
	index     int
	name      string
	omitEmpty bool
}

// jsonFields lists the fields encoding/json writes of struct type t, in
// order, or false when t has what streamJSON leaves to encoding/json (an
// embedded field, a tag option other than omitempty, a name it would
// quote or change, two fields of one name).
func jsonFields(t reflect.Type) ([]jsonField, bool) {
	var out []jsonField
	seen := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil, false
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts != "" && opts != "omitempty" {
			return nil, false
		}
		if name == "" {
			name = f.Name
		}
		if !plainJSONName(name) || seen[name] {
			return nil, false
		}
		seen[name] = true
		out = append(out, jsonField{index: i, name: name, omitEmpty: opts == "omitempty"})
	}
	return out, true
}

// plainJSONName is a name encoding/json takes from a tag as it is and
// writes without escapes: letters, digits, '_', '-', '.'.
func plainJSONName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
		default:
			return false
		}
	}
	return true
}

// emptyJSON is encoding/json's test for omitempty.
func emptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// jsonStream writes one document to w.
type jsonStream struct {
	w   *bufio.Writer
	buf bytes.Buffer
	// enc encodes compactly into buf (SetEscapeHTML(false)), made once.
	enc *json.Encoder
}

// value writes v's encoding as it stands at prefix (the indentation of
// its line), without a trailing newline: encoded compactly, then laid
// out by indentJSON.
func (s *jsonStream) value(v any, prefix string) error {
	s.buf.Reset()
	if s.enc == nil {
		s.enc = json.NewEncoder(&s.buf)
		s.enc.SetEscapeHTML(false)
	}
	if err := s.enc.Encode(v); err != nil {
		return err
	}
	indentJSON(s.w, bytes.TrimSuffix(s.buf.Bytes(), []byte("\n")), prefix)
	return nil
}

// indentJSON writes src, one value as encoding/json encodes it (compact:
// no space outside strings, MarshalJSON output compacted too), to w as
// json.Indent(dst, src, prefix, jsonIndent) lays it out: a newline,
// prefix and one indent per depth after '{', '[' and ',' and before a
// closing '}' or ']' (an empty object or array stays "{}" or "[]"), ": "
// after a key, strings, numbers and literals as they are. It is
// json.Indent without its scanner's per-byte state machine, which src,
// valid and compact, does not need: what lies between two structural
// bytes is written in one piece. TestWriteJSONIsEncoders and
// TestWriteJSONRandomDocuments hold the two equal.
func indentJSON(w *bufio.Writer, src []byte, prefix string) {
	depth := 0
	// lines[d] is the newline and indentation of depth d.
	var lines []string
	newline := func() {
		for len(lines) <= depth {
			lines = append(lines, "\n"+prefix+strings.Repeat(jsonIndent, len(lines)))
		}
		w.WriteString(lines[depth])
	}
	start := 0 // src[start:i] is still to write, as it is
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '"':
			i = closingQuote(src, i)
		case '{', '[':
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				i++
				continue
			}
			w.Write(src[start : i+1])
			start = i + 1
			depth++
			newline()
		case '}', ']':
			w.Write(src[start:i])
			start = i
			depth--
			newline()
		case ',':
			w.Write(src[start : i+1])
			start = i + 1
			newline()
		case ':':
			w.Write(src[start:i])
			start = i + 1
			w.WriteString(": ")
		}
	}
	w.Write(src[start:])
}

// closingQuote is the index of the quote that ends the JSON string
// opening at src[open] (one not escaped: after an even number of
// backslashes), or the last index when none does.
func closingQuote(src []byte, open int) int {
	j := open + 1
	for {
		k := bytes.IndexByte(src[j:], '"')
		if k < 0 {
			return len(src) - 1
		}
		j += k
		backslashes := 0
		for m := j - 1; m > open && src[m] == '\\'; m-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return j
		}
		j++
	}
}

// document writes v, a struct or a pointer to one, field by field, or
// whole when jsonFields says so.
func (s *jsonStream) document(v any) error {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct || marshalsItself(rv.Type()) {
		return s.value(v, "")
	}
	fields, ok := jsonFields(rv.Type())
	if !ok {
		return s.value(v, "")
	}
	inner := jsonIndent
	n := 0
	s.w.WriteByte('{')
	for _, f := range fields {
		fv := rv.Field(f.index)
		if f.omitEmpty && emptyJSON(fv) {
			continue
		}
		if n > 0 {
			s.w.WriteByte(',')
		}
		n++
		s.w.WriteString("\n" + inner + `"` + f.name + `": `)
		if err := s.field(fv, inner); err != nil {
			return err
		}
	}
	if n > 0 {
		s.w.WriteString("\n")
	}
	s.w.WriteString("}")
	return nil
}

// field writes one field's value at prefix: a non-empty slice element by
// element, anything else whole.
func (s *jsonStream) field(fv reflect.Value, prefix string) error {
	t := fv.Type()
	if fv.Kind() != reflect.Slice || fv.IsNil() || fv.Len() == 0 || t.Elem().Kind() == reflect.Uint8 || marshalsItself(t) {
		return s.value(addressed(fv), prefix)
	}
	elem := prefix + jsonIndent
	s.w.WriteByte('[')
	for i := range fv.Len() {
		if i > 0 {
			s.w.WriteByte(',')
		}
		s.w.WriteString("\n" + elem)
		if err := s.value(addressed(fv.Index(i)), elem); err != nil {
			return err
		}
	}
	s.w.WriteString("\n" + prefix + "]")
	return nil
}

// addressed is v to encode as encoding/json encodes it in place: through
// a pointer when it is addressable (a field of a struct given by pointer,
// an element of a slice), so that a MarshalJSON or MarshalText with a
// pointer receiver runs as it would there.
func addressed(v reflect.Value) any {
	if v.CanAddr() {
		return v.Addr().Interface()
	}
	return v.Interface()
}

// streamJSON writes v as WriteJSON does, through a buffer, part by part.
func streamJSON(w io.Writer, v any) error {
	s := &jsonStream{w: bufio.NewWriterSize(w, 64<<10)}
	if err := s.document(v); err != nil {
		return err
	}
	s.w.WriteByte('\n')
	return s.w.Flush()
}
