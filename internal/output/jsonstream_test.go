package output

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// wholeJSON is what WriteJSON wrote before it streamed: one json.Encoder
// over the whole value.
func wholeJSON(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

type ptrMarshal struct{ N int }

func (p *ptrMarshal) MarshalJSON() ([]byte, error) {
	return []byte(`{"by":"pointer","n":` + strconv.Itoa(p.N) + `}`), nil
}

type valMarshal struct{ S string }

func (v valMarshal) MarshalText() ([]byte, error) { return []byte("text:" + v.S), nil }

type row struct {
	Name   string            `json:"name"`
	Tags   []string          `json:"tags"`
	Labels map[string]string `json:"labels,omitempty"`
	Inner  *row              `json:"inner,omitempty"`
	Count  int64             `json:"count"`
	OK     bool              `json:"ok"`
}

type doc struct {
	Policy   string         `json:"policy"`
	Rows     []row          `json:"rows"`
	Ptrs     []*row         `json:"ptrs"`
	Empty    []row          `json:"empty"`
	Nil      []row          `json:"nil"`
	Omitted  []row          `json:"omitted,omitempty"`
	Skip     string         `json:"-"`
	Dash     string         `json:"-,"`
	hidden   string         // unexported: never written
	Raw      []byte         `json:"raw"`
	Mine     ptrMarshal     `json:"mine"`
	Mines    []ptrMarshal   `json:"mines"`
	Text     valMarshal     `json:"text"`
	Any      any            `json:"any"`
	Map      map[string]int `json:"map"`
	NoTag    string
	HTML     string `json:"html"`
	Zero     int    `json:"zero,omitempty"`
	Interval [2]int `json:"interval"`
}

type embedded struct {
	row
	Extra string `json:"extra"`
}

type stringOpt struct {
	N int `json:"n,string"`
}

type nothing struct {
	A string `json:"a,omitempty"`
}

// TestWriteJSONIsEncoders: streaming changes no byte of any document,
// whether streamJSON lays it out field by field or falls back to
// encoding it whole.
func TestWriteJSONIsEncoders(t *testing.T) {
	r := row{Name: "q-0001", Tags: []string{"a", "<b>&"}, Labels: map[string]string{"z": "1", "a": "2"}, Count: 3, OK: true}
	full := doc{
		Policy: "lab", Rows: []row{r, {Name: "empty"}}, Ptrs: []*row{&r, nil}, Empty: []row{},
		Skip: "never", Dash: "dash", hidden: "never", Raw: []byte("bytes"),
		Mine: ptrMarshal{N: 1}, Mines: []ptrMarshal{{N: 2}, {N: 3}}, Text: valMarshal{S: "x"},
		Any: []any{1, "two", map[string]any{"three": 3}}, Map: map[string]int{"b": 2, "a": 1},
		NoTag: "no tag", HTML: "a < b && c > d",
	}
	for name, v := range map[string]any{
		"pointer":            &full,
		"value":              full,
		"zero":               doc{},
		"embedded fallback":  &embedded{row: r, Extra: "x"},
		"tag option":         &stringOpt{N: 4},
		"no field written":   &nothing{},
		"slice":              []row{r},
		"nil pointer":        (*doc)(nil),
		"string":             "plain",
		"marshaler document": &ptrMarshal{N: 5},
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteJSON(&b, v); err != nil {
				t.Fatal(err)
			}
			if want := wholeJSON(t, v); b.String() != want {
				t.Errorf("WriteJSON:\n%s\njson.Encoder:\n%s", b.String(), want)
			}
		})
	}
}

// randomJSONString is up to most-1 pieces of what JSON escapes or
// structures with: quotes, backslashes, control characters, HTML,
// brackets, commas, colons, multi-byte runes.
func randomJSONString(rng *rand.Rand, most int) string {
	alphabet := []string{"a", "Z", "0", " ", "\n", "\t", `"`, `\`, `\"`, `\\`, "<", ">", "&", "é", "\u2028", "\x00", "日本", "{", "}", "[", "]", ",", ":"}
	var b strings.Builder
	for range rng.IntN(most) {
		b.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

// TestWriteJSONRandomDocuments compares WriteJSON with json.Encoder on
// generated documents: nesting, empty and nil slices, strings JSON
// escapes.
func TestWriteJSONRandomDocuments(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1000))
	str := func() string { return randomJSONString(rng, 8) }
	var mkRow func(depth int) row
	mkRow = func(depth int) row {
		r := row{Name: str(), Count: rng.Int64N(1 << 40), OK: rng.IntN(2) == 0}
		switch rng.IntN(3) {
		case 0:
			r.Tags = []string{}
		case 1:
			for range rng.IntN(4) + 1 {
				r.Tags = append(r.Tags, str())
			}
		}
		if rng.IntN(2) == 0 {
			r.Labels = map[string]string{str(): str()}
		}
		if depth < 3 && rng.IntN(2) == 0 {
			in := mkRow(depth + 1)
			r.Inner = &in
		}
		return r
	}
	for i := range 200 {
		d := &doc{Policy: str(), HTML: str(), NoTag: str(), Zero: rng.IntN(2)}
		for range rng.IntN(5) {
			d.Rows = append(d.Rows, mkRow(0))
		}
		if rng.IntN(2) == 0 {
			d.Omitted = []row{mkRow(0)}
		}
		var b bytes.Buffer
		if err := WriteJSON(&b, d); err != nil {
			t.Fatal(err)
		}
		if want := wholeJSON(t, d); b.String() != want {
			t.Fatalf("document %d: WriteJSON:\n%s\njson.Encoder:\n%s", i, b.String(), want)
		}
	}
}

// TestIndentJSONIsIndent compares indentJSON with json.Indent on
// generated values of any shape: nested objects and arrays (empty ones
// too), numbers, literals, and strings full of quotes, backslashes and
// the bytes JSON structures with.
func TestIndentJSONIsIndent(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	str := func() string { return randomJSONString(rng, 10) }
	var mk func(depth int) any
	mk = func(depth int) any {
		switch rng.IntN(7) {
		case 0:
			return str()
		case 1:
			return rng.Float64() * 1e30
		case 2:
			return nil
		case 3:
			return rng.IntN(2) == 0
		case 4:
			m := map[string]any{}
			for range rng.IntN(4) * min(1, 4-depth) {
				m[str()] = mk(depth + 1)
			}
			return m
		case 5:
			a := []any{}
			for range rng.IntN(4) * min(1, 4-depth) {
				a = append(a, mk(depth+1))
			}
			return a
		}
		return -rng.Int64()
	}
	for i := range 2000 {
		src, err := json.Marshal(mk(0))
		if err != nil {
			t.Fatal(err)
		}
		var want, got bytes.Buffer
		if err := json.Indent(&want, src, "    ", jsonIndent); err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(&got)
		indentJSON(w, src, "    ")
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("value %d, %s: indentJSON:\n%s\njson.Indent:\n%s", i, src, got.String(), want.String())
		}
	}
}
