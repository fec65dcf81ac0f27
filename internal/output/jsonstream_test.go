package output

import (
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

// TestWriteJSONRandomDocuments compares WriteJSON with json.Encoder on
// generated documents: nesting, empty and nil slices, strings JSON
// escapes.
func TestWriteJSONRandomDocuments(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1000))
	alphabet := []string{"a", "Z", "0", " ", "\n", "\t", `"`, `\`, "<", ">", "&", "é", "\u2028", "\x00", "日本"}
	str := func() string {
		var b strings.Builder
		for range rng.IntN(8) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
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
