package policy

// Variant is one WorkflowTemplate a template renders to: the template
// itself, or its cache-free variant (the same GPU step without the
// model-store mount, under its own name, taking its own locks).
type Variant struct {
	// Name is the WorkflowTemplate's name.
	Name string
	// Template is the policy's template the variant is rendered from.
	Template Template
	// CacheFree is true for the cache-free variant.
	CacheFree bool
	// Locks are the locks the variant takes, in acquisition order.
	Locks []string
	// ModelCache is the model store's mount; nil on the cache-free variant.
	ModelCache *ModelCache
}

// Variants returns the variants of every template, by template name, each
// template before its cache-free variant.
func (p *Policy) Variants() []Variant {
	var out []Variant
	for _, n := range p.TemplateNames() {
		out = append(out, VariantsOf(p.Templates[n])...)
	}
	return out
}

// VariantsOf returns a template's variants: the template, then its
// cache-free variant if it has one.
func VariantsOf(t Template) []Variant {
	out := []Variant{{Name: t.Name, Template: t, Locks: t.Locks, ModelCache: t.ModelCache}}
	if t.CacheFree != nil {
		out = append(out, Variant{Name: t.CacheFree.Name, Template: t, CacheFree: true, Locks: t.CacheFree.Locks})
	}
	return out
}

// Path is the policy field the variant is written in: templates.NAME, or
// templates.NAME.cacheFree.
func (v Variant) Path() []string {
	if v.CacheFree {
		return []string{"templates", v.Template.Name, "cacheFree"}
	}
	return []string{"templates", v.Template.Name}
}

// Variant finds a variant by its WorkflowTemplate name.
func (p *Policy) Variant(name string) (Variant, bool) {
	for _, v := range p.Variants() {
		if v.Name == name {
			return v, true
		}
	}
	return Variant{}, false
}

// SmallestLock returns the lock with the smallest size among locks (the
// first in acquisition order on a tie): the one that bounds how many of a
// step run at once. False when none of them is a lock of the policy.
func (p *Policy) SmallestLock(locks []string) (Lock, bool) {
	var best Lock
	found := false
	for _, n := range locks {
		l, ok := p.Locks[n]
		if !ok {
			continue
		}
		if !found || l.Size < best.Size {
			best, found = l, true
		}
	}
	return best, found
}
