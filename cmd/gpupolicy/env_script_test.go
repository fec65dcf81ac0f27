package main

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/spf13/cobra"
)

// The environment scenarios (env_*, drift_*, pin_*, plan_* in
// testdata/script) need git repositories. In the test binary only,
// gpupolicy has a hidden verb that makes them with go-git, so the scripts
// need no git installed and no change to the script runner:
//
//	gpupolicy testgit init                 an empty repository here, branch main
//	gpupolicy testgit commit MSG           commit everything (adds, changes, deletions)
//	gpupolicy testgit tag NAME             a lightweight tag at HEAD
//	gpupolicy testgit branch NAME          a branch at HEAD
//	gpupolicy testgit status               changed paths, "XY path" as git status --porcelain
//	gpupolicy testgit files [REV]          the paths in a commit's tree (default HEAD)
//	gpupolicy testgit log                  "subject" of each commit, newest first
//
// Commits are made by "Lab Tester" one minute apart from a fixed date, so a
// scenario's hashes are the same on every run.
func init() { commands = append(commands, newTestGitCmd) }

func newTestGitCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "testgit", Hidden: true, Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return testGit(cmd, args) }}
	return cmd
}

func testGit(cmd *cobra.Command, args []string) error {
	out := cmd.OutOrStdout()
	if args[0] == "init" {
		r, err := git.PlainInitWithOptions(".", &git.PlainInitOptions{
			InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
		})
		if err != nil {
			return err
		}
		cfg, err := r.Config()
		if err != nil {
			return err
		}
		cfg.User.Name, cfg.User.Email = "Lab Tester", "tester@lab.internal"
		return r.SetConfig(cfg)
	}
	r, err := git.PlainOpenWithOptions(".", &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return err
	}
	wt, err := r.Worktree()
	if err != nil {
		return err
	}
	switch args[0] {
	case "commit":
		if len(args) != 2 {
			return errors.New("usage: testgit commit MSG")
		}
		if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
			return err
		}
		n := 0
		if head, err := r.Head(); err == nil {
			iter, _ := r.Log(&git.LogOptions{From: head.Hash()})
			_ = iter.ForEach(func(*object.Commit) error { n++; return nil })
		}
		when := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC).Add(time.Duration(n+1) * time.Minute)
		sig := &object.Signature{Name: "Lab Tester", Email: "tester@lab.internal", When: when}
		h, err := wt.Commit(args[1], &git.CommitOptions{Author: sig, Committer: sig, All: true})
		if err != nil {
			return err
		}
		fmt.Fprintln(out, h.String()[:7], args[1])
	case "tag", "branch":
		if len(args) != 2 {
			return fmt.Errorf("usage: testgit %s NAME", args[0])
		}
		head, err := r.Head()
		if err != nil {
			return err
		}
		if args[0] == "tag" {
			_, err = r.CreateTag(args[1], head.Hash(), nil)
		} else {
			err = r.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName(args[1]), head.Hash()))
		}
		return err
	case "status":
		st, err := wt.Status()
		if err != nil {
			return err
		}
		var lines []string
		for p, s := range st {
			if s.Staging == git.Unmodified && s.Worktree == git.Unmodified {
				continue
			}
			lines = append(lines, fmt.Sprintf("%c%c %s", s.Staging, s.Worktree, p))
		}
		sort.Strings(lines)
		for _, l := range lines {
			fmt.Fprintln(out, l)
		}
	case "files":
		rev := "HEAD"
		if len(args) > 1 {
			rev = args[1]
		}
		h, err := r.ResolveRevision(plumbing.Revision(rev))
		if err != nil {
			return err
		}
		c, err := r.CommitObject(*h)
		if err != nil {
			return err
		}
		tree, err := c.Tree()
		if err != nil {
			return err
		}
		return tree.Files().ForEach(func(f *object.File) error {
			fmt.Fprintln(out, f.Name)
			return nil
		})
	case "log":
		iter, err := r.Log(&git.LogOptions{})
		if err != nil {
			return err
		}
		return iter.ForEach(func(c *object.Commit) error {
			fmt.Fprintln(out, c.Hash.String()[:7], testGitFirstLine(c.Message))
			return nil
		})
	default:
		return fmt.Errorf("testgit: unknown %q", args[0])
	}
	return nil
}

func testGitFirstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
