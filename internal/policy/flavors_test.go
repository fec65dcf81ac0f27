package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// loadTwoCards loads policies/lab with testdata/two-cards.cue.
func loadTwoCards(t *testing.T) *Policy {
	t.Helper()
	files := map[string][]byte{}
	dir := filepath.Join("..", "..", "policies", "lab")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".cue") {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = b
		}
	}
	b, err := os.ReadFile(filepath.Join("testdata", "two-cards.cue"))
	if err != nil {
		t.Fatal(err)
	}
	files["two-cards.cue"] = b
	p, err := LoadFiles(files, func(n string) string { return n })
	if err != nil {
		t.Fatalf("the lab with two cards does not load: %v", err)
	}
	return p
}

func TestLoadFlavorOrderAndFungibility(t *testing.T) {
	p := loadTwoCards(t)
	q := p.Queues["gpu-mixed"]
	if got := q.FlavorNames(); !slices.Equal(got, []string{"l4", "a100"}) {
		t.Errorf("gpu-mixed's flavors %v, want the declaration order l4, a100", got)
	}
	if got := q.Fungibility(); got != (FlavorFungibility{WhenCanBorrow: TryNextFlavor, WhenCanPreempt: TryNextFlavor}) {
		t.Errorf("gpu-mixed's flavorFungibility %+v", got)
	}
	if got := p.Queues["gpu-large-model"].FlavorFungibility; got != (FlavorFungibility{}) {
		t.Errorf("gpu-large-model writes no flavorFungibility, got %+v", got)
	}
	if got := p.Queues["gpu-large-model"].Fungibility(); got != (FlavorFungibility{WhenCanBorrow: MayStopSearch, WhenCanPreempt: TryNextFlavor}) {
		t.Errorf("Kueue's defaults: %+v", got)
	}
	for tmpl, want := range map[string][]string{
		"gpu-any":  {"l4", "a100"}, // anyCard
		"gpu-a100": {"l4", "a100"}, // a100 has no nodeLabels
	} {
		if got := p.TemplateCards(p.Templates[tmpl]); !slices.Equal(got, want) {
			t.Errorf("%s may land on %v, want %v", tmpl, got, want)
		}
	}
	if !p.Templates["gpu-any"].AnyCard || p.Templates["gpu-step"].AnyCard {
		t.Error("anyCard not decoded")
	}
	ws := p.Warnings()
	if len(ws) != 1 || ws[0].Rule != RuleCardAnyFlavor.ID || ws[0].Pos != "two-cards.cue:57:14" {
		t.Fatalf("warnings %v, want one card-any-flavor at two-cards.cue:57:14 (gpu-a100's card)", ws)
	}
	if !strings.Contains(ws[0].Message, "may assign it any of l4, a100") {
		t.Errorf("message: %s", ws[0].Message)
	}
}

func TestFlavorFungibilitySchema(t *testing.T) {
	files := map[string][]byte{"policy.cue": []byte("package lab\nqueues: q: flavorFungibility: whenCanBorrow: \"Borrow\"\n")}
	if _, err := LoadFiles(files, func(n string) string { return n }); err == nil || !strings.Contains(err.Error(), "whenCanBorrow") {
		t.Errorf("whenCanBorrow Borrow (v1beta1's word) accepted: %v", err)
	}
}
