// Package gitrepo is the little of git that gpupolicy needs, on go-git: open
// the repository around a directory, resolve a revision (full or short SHA,
// branch, tag, HEAD), read a directory of files at a commit straight from git
// objects (no checkout), walk the commits that touched some paths, and commit
// a set of paths and nothing else (git commit --only), never touching the
// rest of the index or the working tree.
package gitrepo

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Repo is a git repository with a working tree.
type Repo struct {
	r *git.Repository
	// Root is the absolute path of the working tree.
	Root string
}

// Open opens the repository that contains dir (searching parent
// directories, like git does).
func Open(dir string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r, err := git.PlainOpenWithOptions(abs, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		if errors.Is(err, git.ErrRepositoryNotExists) {
			return nil, fmt.Errorf("%s is not in a git repository", dir)
		}
		return nil, fmt.Errorf("opening the git repository around %s: %w", dir, err)
	}
	wt, err := r.Worktree()
	if err != nil {
		return nil, fmt.Errorf("the git repository around %s has no working tree: %w", dir, err)
	}
	return &Repo{r: r, Root: wt.Filesystem.Root()}, nil
}

// Git returns the underlying go-git repository.
func (g *Repo) Git() *git.Repository { return g.r }

// Rel returns path (absolute or relative to the current directory) relative
// to the working tree's root, slash-separated, or an error if it lies
// outside the working tree.
func (g *Repo) Rel(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	// Resolve symlinks on both sides (t.TempDir on macOS, /tmp links).
	root := g.Root
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	if a, err := evalExisting(abs); err == nil {
		abs = a
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s is outside the git working tree %s", p, g.Root)
	}
	return filepath.ToSlash(rel), nil
}

// evalExisting resolves symlinks in the longest existing prefix of p.
func evalExisting(p string) (string, error) {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r, nil
	}
	dir, base := filepath.Split(p)
	dir = filepath.Clean(dir)
	if dir == p {
		return p, nil
	}
	r, err := evalExisting(dir)
	if err != nil {
		return "", err
	}
	return filepath.Join(r, base), nil
}

// Commit is what gpupolicy prints of a commit.
type Commit struct {
	Hash    string `json:"hash"`
	Subject string `json:"subject"`
	Author  string `json:"author"`
	// Date is RFC 3339.
	Date string `json:"date"`
}

// Short is the commit's abbreviated hash (7 characters, like git's default).
func (c Commit) Short() string { return Short(c.Hash) }

// String is "a1b2c3d subject".
func (c Commit) String() string { return c.Short() + " " + c.Subject }

// Short abbreviates a hash to 7 characters.
func Short(hash string) string {
	if len(hash) > 7 {
		return hash[:7]
	}
	return hash
}

func describe(c *object.Commit) Commit {
	subject, _, _ := strings.Cut(strings.TrimSpace(c.Message), "\n")
	return Commit{
		Hash:    c.Hash.String(),
		Subject: subject,
		Author:  c.Author.Name,
		Date:    c.Author.When.UTC().Format("2006-01-02T15:04:05Z"),
	}
}

// ErrUnknownRevision is returned (wrapped) when a revision names no commit.
var ErrUnknownRevision = errors.New("names no commit in this repository")

// Resolve resolves a revision to a commit: a full or abbreviated SHA (at
// least 4 hex digits; an ambiguous one is an error), a branch, a tag
// (annotated tags are peeled), HEAD, or anything go-git's revision parser
// understands (HEAD~1, main^).
func (g *Repo) Resolve(rev string) (Commit, error) {
	h, err := g.resolve(rev)
	if err != nil {
		return Commit{}, err
	}
	c, err := g.r.CommitObject(h)
	if err != nil {
		return Commit{}, fmt.Errorf("revision %q: %w", rev, err)
	}
	return describe(c), nil
}

func (g *Repo) resolve(rev string) (plumbing.Hash, error) {
	rev = strings.TrimSpace(rev)
	if rev == "" {
		return plumbing.ZeroHash, fmt.Errorf("empty revision")
	}
	// go-git's revision parser ignores what it does not understand
	// (HEAD@{1} resolves to HEAD, HEAD^{tree} to HEAD's commit); a pin must
	// never be a silent guess, so those forms are refused.
	if strings.Contains(rev, "@{") || strings.Contains(rev, "^{") || strings.Contains(rev, ":") {
		return plumbing.ZeroHash, fmt.Errorf("revision %q: reflog (@{…}), peel (^{…}) and path (:) forms are not supported; name a commit, branch or tag", rev)
	}
	if isHex(rev) && len(rev) < 4 {
		return plumbing.ZeroHash, fmt.Errorf("revision %q is too short to name a commit (4 hex digits at least)", rev)
	}
	h, err := g.r.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		if errors.Is(err, plumbing.ErrReferenceNotFound) || errors.Is(err, plumbing.ErrObjectNotFound) {
			hint := ""
			if isHex(rev) {
				if shallow, _ := g.r.Storer.Shallow(); len(shallow) > 0 {
					hint = " (this is a shallow clone; fetch the full history)"
				}
			}
			return plumbing.ZeroHash, fmt.Errorf("revision %q %w%s", rev, ErrUnknownRevision, hint)
		}
		if errors.Is(err, io.EOF) {
			// HEAD~12 past the root commit.
			return plumbing.ZeroHash, fmt.Errorf("revision %q %w (it goes past the first commit)", rev, ErrUnknownRevision)
		}
		return plumbing.ZeroHash, fmt.Errorf("revision %q: %w", rev, err)
	}
	// go-git picks the first commit matching an abbreviated hash; git
	// refuses an ambiguous one, and so do we (a pin must be exact).
	if isHex(rev) && len(rev) < 40 {
		if _, err := g.r.Reference(plumbing.NewBranchReferenceName(rev), true); err != nil {
			if n, err := g.countPrefix(rev); err == nil && n > 1 {
				return plumbing.ZeroHash, fmt.Errorf("revision %q is ambiguous: %d commits start with it", rev, n)
			}
		}
	}
	return *h, nil
}

func (g *Repo) countPrefix(prefix string) (int, error) {
	iter, err := g.r.CommitObjects()
	if err != nil {
		return 0, err
	}
	defer iter.Close()
	n := 0
	prefix = strings.ToLower(prefix)
	err = iter.ForEach(func(c *object.Commit) error {
		if strings.HasPrefix(c.Hash.String(), prefix) {
			n++
		}
		return nil
	})
	return n, err
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// Head returns the commit HEAD points to.
func (g *Repo) Head() (Commit, error) {
	ref, err := g.r.Head()
	if err != nil {
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			return Commit{}, fmt.Errorf("the repository has no commits yet")
		}
		return Commit{}, err
	}
	c, err := g.r.CommitObject(ref.Hash())
	if err != nil {
		return Commit{}, err
	}
	return describe(c), nil
}

// Files returns the files under dir (slash-separated, relative to the
// repository root; "" or "." for the root) in the given commit's tree,
// keyed by their path relative to dir, subdirectories included. ok is false
// when the commit has no such directory.
func (g *Repo) Files(commit, dir string) (files map[string][]byte, ok bool, err error) {
	tree, err := g.tree(commit)
	if err != nil {
		return nil, false, err
	}
	dir = cleanDir(dir)
	if dir != "" {
		tree, err = tree.Tree(dir)
		if errors.Is(err, object.ErrDirectoryNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s at %s: %w", dir, Short(commit), err)
		}
	}
	files = map[string][]byte{}
	err = tree.Files().ForEach(func(f *object.File) error {
		if !f.Mode.IsFile() {
			return nil
		}
		r, err := f.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		files[f.Name] = b
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading %s at %s: %w", dir, Short(commit), err)
	}
	return files, true, nil
}

// File returns one file at a commit; ok is false when it does not exist.
func (g *Repo) File(commit, name string) (b []byte, ok bool, err error) {
	tree, err := g.tree(commit)
	if err != nil {
		return nil, false, err
	}
	f, err := tree.File(cleanDir(name))
	if errors.Is(err, object.ErrFileNotFound) || errors.Is(err, object.ErrDirectoryNotFound) || errors.Is(err, object.ErrEntryNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	s, err := f.Contents()
	if err != nil {
		return nil, false, err
	}
	return []byte(s), true, nil
}

func (g *Repo) tree(commit string) (*object.Tree, error) {
	h, err := g.resolve(commit)
	if err != nil {
		return nil, err
	}
	c, err := g.r.CommitObject(h)
	if err != nil {
		return nil, err
	}
	return c.Tree()
}

func cleanDir(dir string) string {
	dir = path.Clean(filepath.ToSlash(dir))
	if dir == "." || dir == "/" {
		return ""
	}
	return strings.TrimPrefix(dir, "/")
}

// underAny reports whether p is one of paths or lies under one of them.
func underAny(p string, paths []string) bool {
	for _, d := range paths {
		d = cleanDir(d)
		if d == "" || p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// Log returns the commits reachable from `from` that changed anything
// under paths, newest first (like git log --topo-order FROM -- PATHS, within
// go-git's rules: a merge counts when it differs from its first parent).
func (g *Repo) Log(from string, paths ...string) ([]Commit, error) {
	h, err := g.resolve(from)
	if err != nil {
		return nil, err
	}
	iter, err := g.r.Log(&git.LogOptions{
		From:       h,
		Order:      git.LogOrderCommitterTime,
		PathFilter: func(p string) bool { return underAny(p, paths) },
	})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	var out []Commit
	err = iter.ForEach(func(c *object.Commit) error {
		out = append(out, describe(c))
		return nil
	})
	return out, err
}

// Behind returns the commits reachable from head that are not reachable
// from base (git log base..head), newest first, and whether base is an
// ancestor of head.
func (g *Repo) Behind(base, head string) (commits []Commit, ancestor bool, err error) {
	bh, err := g.resolve(base)
	if err != nil {
		return nil, false, err
	}
	hh, err := g.resolve(head)
	if err != nil {
		return nil, false, err
	}
	seen := map[plumbing.Hash]bool{}
	bc, err := g.r.CommitObject(bh)
	if err != nil {
		return nil, false, err
	}
	err = object.NewCommitPreorderIter(bc, nil, nil).ForEach(func(c *object.Commit) error {
		seen[c.Hash] = true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	hc, err := g.r.CommitObject(hh)
	if err != nil {
		return nil, false, err
	}
	err = object.NewCommitIterCTime(hc, seen, nil).ForEach(func(c *object.Commit) error {
		commits = append(commits, describe(c))
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if ancestor, err = bc.IsAncestor(hc); err != nil {
		return nil, false, err
	}
	if bh == hh {
		ancestor = true
	}
	return commits, ancestor, nil
}

// ChangedIn reports whether a commit changed anything under paths compared
// with its first parent (a root commit changes everything it holds).
func (g *Repo) ChangedIn(commit string, paths ...string) (bool, error) {
	return g.ChangedMatching(commit, func(p string) bool { return underAny(p, paths) })
}

// ChangedMatching reports whether a commit changed any path for which match
// returns true, compared with its first parent.
func (g *Repo) ChangedMatching(commit string, match func(path string) bool) (bool, error) {
	h, err := g.resolve(commit)
	if err != nil {
		return false, err
	}
	c, err := g.r.CommitObject(h)
	if err != nil {
		return false, err
	}
	tree, err := c.Tree()
	if err != nil {
		return false, err
	}
	var parentTree *object.Tree
	if c.NumParents() > 0 {
		p, err := c.Parent(0)
		if err != nil {
			return false, err
		}
		if parentTree, err = p.Tree(); err != nil {
			return false, err
		}
	}
	changes, err := object.DiffTree(parentTree, tree)
	if err != nil {
		return false, err
	}
	for _, ch := range changes {
		if ch.From.Name != "" && match(ch.From.Name) || ch.To.Name != "" && match(ch.To.Name) {
			return true, nil
		}
	}
	return false, nil
}

// readWorktreeFile reads a file of the working tree by slash path.
func (g *Repo) readWorktreeFile(rel string) ([]byte, os.FileInfo, error) {
	p := filepath.Join(g.Root, filepath.FromSlash(rel))
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, nil, err
	}
	b, err := os.ReadFile(p)
	return b, fi, err
}
