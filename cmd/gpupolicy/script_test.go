package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets testscript run the gpupolicy binary as a command.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"gpupolicy": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the CLI scenarios in testdata/script: one txtar file per
// scenario with its input files, command lines and expected output.
//
// Extra commands:
//
//	cplab DIR            copy the repository's policies/lab to DIR
//	exits N CMD ARGS...  run CMD and require exit status N exactly
func TestScripts(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("REPO", repo)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"cplab": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 {
					ts.Fatalf("usage: cplab DIR")
				}
				copyDir(ts, filepath.Join(repo, "policies", "lab"), ts.MkAbs(args[0]))
			},
			"exits": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) < 2 {
					ts.Fatalf("usage: exits N CMD ARGS...")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("exits: %v", err)
				}
				got := 0
				if err := ts.Exec(args[1], args[2:]...); err != nil {
					var ee *exec.ExitError
					if !errors.As(err, &ee) {
						ts.Fatalf("exits: %v", err)
					}
					got = ee.ExitCode()
				}
				if got != want {
					ts.Fatalf("%s exited %d, want %d", args[1], got, want)
				}
			},
		},
	})
}

func copyDir(ts *testscript.TestScript, from, to string) {
	entries, err := os.ReadDir(from)
	ts.Check(err)
	ts.Check(os.MkdirAll(to, 0o755))
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		ts.Check(err)
		ts.Check(os.WriteFile(filepath.Join(to, e.Name()), b, 0o644))
	}
}
