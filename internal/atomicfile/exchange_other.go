//go:build !linux

package atomicfile

// exchange has no atomic implementation here; ReplaceDir falls back to two
// renames.
func exchange(a, b string) error { return errNoExchange }
