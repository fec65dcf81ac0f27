package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestProfileFlags: the hidden --cpuprofile and --memprofile write pprof
// profiles (gzip-compressed protocol buffers) of the verb, whose outcome
// they leave as it is; neither is in the help.
func TestProfileFlags(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
	var out, errOut bytes.Buffer
	if code := run([]string{"vet", filepath.Join("..", "..", "policies", "lab"), "--cpuprofile", cpu, "--memprofile", mem}, &out, &errOut); code != exitClean {
		t.Fatalf("vet exit %d: %s", code, errOut.String())
	}
	for _, f := range []string{cpu, mem} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s is not a gzip-compressed profile (%d bytes)", filepath.Base(f), len(b))
		}
	}
	out.Reset()
	if code := run([]string{"vet", "--help"}, &out, &errOut); code != exitClean {
		t.Fatalf("vet --help exit %d", code)
	}
	if bytes.Contains(out.Bytes(), []byte("profile")) {
		t.Errorf("vet --help shows the hidden profile flags:\n%s", out.String())
	}
	if code := run([]string{"vet", filepath.Join("..", "..", "policies", "lab"), "--cpuprofile", filepath.Join(dir, "no", "such", "dir", "f")}, &out, &errOut); code != exitInput {
		t.Errorf("an unwritable --cpuprofile: exit %d, want %d", code, exitInput)
	}
}
