package render

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unicode"

	goyaml "go.yaml.in/yaml/v2"
)

// yamlEncoder writes a JSON-decoded object (maps with string keys, []any,
// strings, int64, bool, nil) as go.yaml.in/yaml/v2's Marshal does, byte
// for byte, at a fraction of its cost: yaml.v2 runs every scalar through
// its emitter's character analysis (a 1,000-queue render spent a fifth of
// its CPU there). It lays out the block structure itself (yaml.v2's
// defaults: indent 2, a sequence under a key not indented, a map in a
// sequence item starting on the "- " line, keys in yaml.v2's order,
// keyLess) and writes the scalars yaml.v2 writes plain and unfolded
// (plainYAML), and the one-line printable-ASCII strings it writes plain or
// single-quoted and folds at 80 columns (text: the VAP messages); every
// other scalar (double-quoted, a literal block, non-ASCII) is yaml.v2's
// own rendering of it at the same place (scalar), cached. Anything else
// (a float, a key yaml.v2 would quote, a sequence directly in a sequence)
// makes the object go to yaml.v2 whole. TestYAMLEncoderIsYAMLv2 compares
// the two on every object the policies in policies/ render to,
// TestYAMLEncoderRandomDocuments on generated documents.
type yamlEncoder struct {
	buf []byte
	// path is the keys and sequence items ("-") from the root to where
	// the encoder is, for scalar's context.
	path []string
	// scalars caches scalar: path and value → rendering.
	scalars map[string]string
	failed  bool
}

func newYAMLEncoder() *yamlEncoder { return &yamlEncoder{scalars: map[string]string{}} }

// marshal returns head followed by obj's YAML, as goyaml.Marshal(obj)
// writes it.
func (e *yamlEncoder) marshal(head string, obj map[string]any) ([]byte, error) {
	e.buf, e.path, e.failed = append(e.buf[:0], head...), e.path[:0], false
	if len(obj) > 0 {
		e.mapping(obj, 0, false)
	}
	if len(obj) == 0 || e.failed {
		b, err := goyaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		return append([]byte(head), b...), nil
	}
	return bytes.Clone(e.buf), nil
}

func (e *yamlEncoder) indent(n int) {
	for range n {
		e.buf = append(e.buf, ' ')
	}
}

// mapping writes a non-empty map whose keys stand at column ind; inline
// when the first key follows a "- " already written.
func (e *yamlEncoder) mapping(m map[string]any, ind int, inline bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if !plainYAML(k) || len(k) > 120 {
			e.failed = true
			return
		}
		keys = append(keys, k)
	}
	if len(keys) > 1 {
		slices.SortFunc(keys, func(a, b string) int {
			switch {
			case keyLess(a, b):
				return -1
			case keyLess(b, a):
				return 1
			}
			return 0
		})
	}
	for i, k := range keys {
		if i > 0 || !inline {
			e.indent(ind)
		}
		e.buf = append(e.buf, k...)
		e.buf = append(e.buf, ':')
		e.path = append(e.path, k)
		e.value(m[k], ind, false)
		e.path = e.path[:len(e.path)-1]
		if e.failed {
			return
		}
	}
}

// value writes v after "key:" (inSeq false) or "- " (inSeq true), the
// key or the dash at column ind, and the line's end.
func (e *yamlEncoder) value(v any, ind int, inSeq bool) {
	sep := func() {
		if !inSeq {
			e.buf = append(e.buf, ' ')
		}
	}
	switch v := v.(type) {
	case map[string]any:
		switch {
		case len(v) == 0:
			sep()
			e.buf = append(e.buf, "{}\n"...)
		case inSeq:
			e.mapping(v, ind+2, true)
		default:
			e.buf = append(e.buf, '\n')
			e.mapping(v, ind+2, false)
		}
		return
	case []any:
		switch {
		case len(v) == 0:
			sep()
			e.buf = append(e.buf, "[]\n"...)
		case inSeq:
			e.failed = true // a sequence in a sequence: yaml.v2's
		default:
			e.buf = append(e.buf, '\n')
			e.sequence(v, ind)
		}
		return
	}
	sep()
	switch v := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		e.buf = strconv.AppendBool(e.buf, v)
	case int64:
		e.buf = strconv.AppendInt(e.buf, v, 10)
	case string:
		if plainYAML(v) {
			e.buf = append(e.buf, v...)
		} else if e.text(v, ind+2) {
			// written: plain or single-quoted, folded
		} else if s, ok := e.scalar(v); ok {
			e.buf = append(e.buf, s...)
		} else {
			e.failed = true
			return
		}
	default: // a float, or not JSON-decoded: yaml.v2's
		e.failed = true
		return
	}
	e.buf = append(e.buf, '\n')
}

// sequence writes a non-empty sequence whose dashes stand at column ind.
func (e *yamlEncoder) sequence(s []any, ind int) {
	e.path = append(e.path, "-")
	for _, v := range s {
		e.indent(ind)
		e.buf = append(e.buf, '-', ' ')
		e.value(v, ind, true)
		if e.failed {
			break
		}
	}
	e.path = e.path[:len(e.path)-1]
}

// scalar is yaml.v2's rendering of the string s where the encoder is (its
// first line from the column after "key: " or "- ", its further lines
// indented as there), without the line's end: yaml.v2's Marshal of the
// path from the root to s alone, less what the encoder writes for that
// path before s. In a block mapping or sequence a scalar's rendering
// depends only on where it starts and on the indentation around it, not
// on its siblings.
func (e *yamlEncoder) scalar(s string) (string, bool) {
	key := strings.Join(e.path, "\x00") + "\x01" + s
	if r, ok := e.scalars[key]; ok {
		return r, true
	}
	var doc, stub any = s, "x"
	for i := len(e.path) - 1; i >= 0; i-- {
		if e.path[i] == "-" {
			doc, stub = []any{doc}, []any{stub}
		} else {
			doc, stub = map[string]any{e.path[i]: doc}, map[string]any{e.path[i]: stub}
		}
	}
	full, err := goyaml.Marshal(doc)
	if err != nil {
		return "", false
	}
	// The prefix: this encoder's own rendering of the path, the scalar
	// being a plain "x".
	sub := &yamlEncoder{}
	if m, ok := stub.(map[string]any); ok {
		sub.mapping(m, 0, false)
	} else {
		return "", false // the root is always a map
	}
	prefix, ok := bytes.CutSuffix(sub.buf, []byte("x\n"))
	if sub.failed || !ok || !bytes.HasPrefix(full, prefix) || !bytes.HasSuffix(full, []byte("\n")) {
		return "", false
	}
	r := string(full[len(prefix) : len(full)-1])
	e.scalars[key] = r
	return r, true
}

// yamlWidth is yaml.v2's line width (best_width): a plain or
// single-quoted scalar is folded at the first space past it.
const yamlWidth = 80

// text writes s as yaml.v2's emitter writes a string of printable ASCII
// without a line break, starting with a letter or with an indicator that
// only ever opens a string (quoteFirst), that is not one of YAML 1.1's
// booleans or nulls: plain where the emitter allows it in block context,
// else single-quoted (yaml_emitter_analyze_scalar,
// yaml_emitter_select_scalar_style), folded as
// yaml_emitter_write_plain_scalar and
// yaml_emitter_write_single_quoted_scalar fold it: at a space, not after
// another, once the column is past yamlWidth, the next line indented to
// cont. False, with nothing written, for any other string.
func (e *yamlEncoder) text(s string, cont int) bool {
	if s == "" || cont >= yamlWidth {
		return false
	}
	indicator := quoteFirst(s[0])
	if !indicator && !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	if plainYAML(s) || yamlWord(s) {
		return false // plainYAML's to write; a YAML word is double-quoted
	}
	quoted := indicator || s[len(s)-1] == ' '
	for i := 1; i < len(s) && !quoted; i++ {
		after := i+1 == len(s) || s[i+1] == ' '
		switch s[i] {
		case ':':
			quoted = after
		case '#':
			quoted = s[i-1] == ' '
		}
	}
	col := len(e.buf) - (bytes.LastIndexByte(e.buf, '\n') + 1)
	if quoted {
		e.buf = append(e.buf, '\'')
		col++
	}
	spaces := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' {
			// (The quoted writer's further i > 0 && i < len(s)-1 holds
			// here: s does not start with a space, and i+1 < len(s).)
			if !spaces && col > yamlWidth && i+1 < len(s) && s[i+1] != ' ' {
				e.buf = append(e.buf, '\n')
				e.indent(cont)
				col = cont
			} else {
				e.buf = append(e.buf, ' ')
				col++
			}
			spaces = true
			continue
		}
		if quoted && c == '\'' {
			e.buf = append(e.buf, '\'')
			col++
		}
		e.buf = append(e.buf, c)
		col++
		spaces = false
	}
	if quoted {
		e.buf = append(e.buf, '\'')
	}
	return true
}

// quoteFirst reports whether c, first in a string, is an indicator that
// makes yaml.v2's emitter single-quote the string and that yaml.v2's
// resolve never reads as anything but a string (resolve.go's resolveTable
// has no entry for it): yaml_emitter_analyze_scalar sets both
// flow_indicators and block_indicators for a first # , [ ] { } & * ! | > '
// " % @ or backquote, so no plain style is allowed. (? : and - are
// indicators only before a space; they are left to yaml.v2.)
func quoteFirst(c byte) bool {
	return strings.IndexByte("#,[]{}&*!|>'\"%@`", c) >= 0
}

// yamlWord reports whether s is one of the words yaml.v2 resolves to a
// boolean or null (resolve.go's resolveMap).
func yamlWord(s string) bool {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF",
		"null", "Null", "NULL":
		return true
	}
	return false
}

// plainYAML reports whether yaml.v2 writes s plain, unquoted and on one
// line, as this encoder does: a letter, then letters, digits and . _ / -
// (no space to fold at, nothing the emitter escapes or that starts a
// YAML indicator), not one of YAML 1.1's booleans or nulls (yaml.v2's
// resolve); or a Kubernetes quantity like 4Gi or 12.5Mi (no int, float
// or timestamp reading of yaml.v2 matches one: a digit run then a
// suffix). Anything else is left to yaml.v2.
func plainYAML(s string) bool {
	if s == "" {
		return false
	}
	if c := s[0]; c >= '0' && c <= '9' {
		return quantityLike(s)
	}
	if !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '/', c == '-':
		default:
			return false
		}
	}
	return !yamlWord(s)
}

// quantityLike is digits, at most one '.' followed by digits, then one of
// the binary or decimal SI suffixes (not e or E, which read as exponents).
func quantityLike(s string) bool {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i < len(s) && s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i+1 {
			return false
		}
		i = j
	}
	switch s[i:] {
	case "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "m":
		return true
	}
	return false
}

// keyLess is yaml.v2's order of two string keys (sorter.go, keyList.Less,
// the string case): letters by code point, a run of digits by its number,
// a letter after anything else.
func keyLess(a, b string) bool {
	ar, br := []rune(a), []rune(b)
	for i := 0; i < len(ar) && i < len(br); i++ {
		if ar[i] == br[i] {
			continue
		}
		al := unicode.IsLetter(ar[i])
		bl := unicode.IsLetter(br[i])
		if al && bl {
			return ar[i] < br[i]
		}
		if al || bl {
			return bl
		}
		var ai, bi int
		var an, bn int64
		if ar[i] == '0' || br[i] == '0' {
			for j := i - 1; j >= 0 && unicode.IsDigit(ar[j]); j-- {
				if ar[j] != '0' {
					an = 1
					bn = 1
					break
				}
			}
		}
		for ai = i; ai < len(ar) && unicode.IsDigit(ar[ai]); ai++ {
			an = an*10 + int64(ar[ai]-'0')
		}
		for bi = i; bi < len(br) && unicode.IsDigit(br[bi]); bi++ {
			bn = bn*10 + int64(br[bi]-'0')
		}
		if an != bn {
			return an < bn
		}
		if ai != bi {
			return ai < bi
		}
		return ar[i] < br[i]
	}
	return len(ar) < len(br)
}
