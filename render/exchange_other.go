//go:build !linux

package render

// exchange has no atomic implementation here; Write falls back to two
// renames.
func exchange(a, b string) error { return errNoExchange }
