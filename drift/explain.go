package drift

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// Sides names the two sides of a comparison in explanations: "the pin" and
// "HEAD" for drift, "the base" and "the head" for a pull request.
type Sides struct{ From, To string }

// GitSides are drift's words.
var GitSides = Sides{From: "the pin", To: "HEAD"}

// Explain fills in the Consequence of each difference the model knows,
// reading the context (LimitRange defaults, which templates take which
// lock, the priority ladder) from both renders.
func Explain(ds []Difference, from, to Set, sides Sides) {
	x := explainer{from: from, to: to, s: sides, decl: declarationResource(from, to),
		fromLocks: indexLocks(from), toLocks: indexLocks(to)}
	for i := range ds {
		ds[i].Consequence = x.explain(&ds[i])
	}
}

type explainer struct {
	from, to Set
	s        Sides
	decl     string
	// fromLocks and toLocks index each side's locks once: the
	// explanations look them up per difference, and a cluster may hold
	// thousands of ConfigMaps.
	fromLocks, toLocks lockIndex
}

// wellKnown reports resources that are not a GPU-memory declaration: the
// shares (with or without renameByDefault) and Kubernetes' own.
func wellKnown(res string) bool {
	switch res {
	case "cpu", policy.ResourceHostMemory, "ephemeral-storage", "pods":
		return true
	}
	return policy.IsSharesResource(res)
}

// declarationResource finds the extended resource that carries GPU-memory
// declarations: the one LimitRanges default that is not a well-known
// resource, else a ClusterQueue's covered resource, else the schema's
// default.
func declarationResource(sets ...Set) string {
	found := map[string]bool{}
	for _, s := range sets {
		for _, lr := range s.OfKind("LimitRange") {
			limits, _ := lookup(lr.Body, "spec", "limits")
			items, _ := limits.([]any)
			for _, it := range items {
				def, _ := lookup(it, "default")
				m, _ := def.(map[string]any)
				for k := range m {
					if !wellKnown(k) {
						found[k] = true
					}
				}
			}
		}
	}
	if len(found) == 0 {
		for _, s := range sets {
			for _, cq := range s.OfKind("ClusterQueue") {
				rgs, _ := lookup(cq.Body, "spec", "resourceGroups")
				items, _ := rgs.([]any)
				for _, rg := range items {
					cov, _ := lookup(rg, "coveredResources")
					rs, _ := cov.([]any)
					for _, r := range rs {
						if s, ok := r.(string); ok && !wellKnown(s) {
							found[s] = true
						}
					}
				}
			}
		}
	}
	if len(found) == 1 {
		for k := range found {
			return k
		}
	}
	return contract.DefaultDeclarationResource
}

func (x *explainer) explain(d *Difference) string {
	switch d.Change {
	case Added:
		return x.added(d)
	case Removed:
		return x.removed(d)
	}
	if len(d.keys) > 0 && d.keys[0] == "metadata" {
		return ""
	}
	switch d.Kind {
	case "WorkflowTemplate":
		return x.template(d)
	case "ConfigMap":
		return x.configMap(d)
	case "ClusterQueue":
		return x.clusterQueue(d)
	case "Cohort":
		return x.cohort(d)
	case "WorkloadPriorityClass":
		return x.priority(d)
	case "LimitRange":
		return x.limitRange(d)
	case "LocalQueue":
		if d.Path == "spec.clusterQueue" {
			return fmt.Sprintf("Jobs in %s that name LocalQueue %s are admitted by ClusterQueue %s at %s, by %s at %s.",
				d.Namespace, d.Name, orNone(d.From), x.s.From, orNone(d.To), x.s.To)
		}
	case "ResourceFlavor":
		if strings.HasPrefix(d.Path, "spec.nodeLabels") {
			return fmt.Sprintf("Kueue places jobs admitted on flavor %s on nodes labelled %s; a node without the label gets none of them.", d.Name, strings.TrimPrefix(d.Path, "spec.nodeLabels"))
		}
	}
	return ""
}

// --- WorkflowTemplates -----------------------------------------------------

// declaresGPUMemory reports whether a template difference is about the
// GPU-memory declaration: the resource in requests or limits, the
// gpu-memory parameter, or the podSpecPatch that carries it to the pod.
func (x *explainer) declaresGPUMemory(d *Difference) bool {
	return strings.Contains(d.Path, fmt.Sprintf("[%q]", x.decl)) ||
		strings.Contains(d.Path, paramPath(contract.ParamGPUMemory)) ||
		strings.HasSuffix(d.Path, ".podSpecPatch") ||
		mentions(d.from, x.decl) || mentions(d.to, x.decl)
}

func mentions(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, s)
	case map[string]any:
		for k, y := range x {
			if k == s || mentions(y, s) {
				return true
			}
		}
	case []any:
		for _, y := range x {
			if mentions(y, s) {
				return true
			}
		}
	}
	return false
}

// stepName is the name of the templates[...] entry a path is in.
func stepName(d *Difference) string {
	for i := 0; i+1 < len(d.keys); i++ {
		if d.keys[i] == "templates" {
			if s, ok := d.keys[i+1].(string); ok {
				return s
			}
		}
	}
	return d.Name
}

func (x *explainer) template(d *Difference) string {
	ns := d.Namespace
	if x.declaresGPUMemory(d) {
		// Which side declares at all: does the container request the
		// declaration resource?
		fromDeclares := x.templateDeclares(x.from, d)
		toDeclares := x.templateDeclares(x.to, d)
		def, hasDef := x.limitDefault(x.from, ns)
		defTo, hasDefTo := x.limitDefault(x.to, ns)
		switch {
		case !fromDeclares && toDeclares:
			counted := "at the LimitRange default of " + ns + ", " + def
			example := fmt.Sprintf(" (a job that declares 12,452 MiB is counted as %s)", def)
			if def == "1,024 MiB" {
				example = " (in the lab, an eval job that declared 12,452 MiB was counted as 1,024 MiB)"
			}
			if !hasDef {
				counted = "as declaring no GPU memory at all (" + x.s.From + " has no LimitRange default in " + ns + ")"
				example = ""
			}
			return fmt.Sprintf("At %s, jobs run through %s declare no GPU memory, so Kueue counts every one %s, whatever it declares%s. %s makes declarations reach the queue.",
				x.s.From, d.Name, counted, example, capitalize(x.s.To))
		case fromDeclares && !toDeclares:
			counted := "at the LimitRange default of " + ns + ", " + defTo + ","
			if !hasDefTo {
				counted = "as declaring no GPU memory at all"
			}
			return fmt.Sprintf("%s drops the GPU-memory declaration from %s: every job run through it would be counted %s whatever it declares.",
				capitalize(x.s.To), d.Name, counted)
		case strings.Contains(d.Path, ".requests"+fmt.Sprintf("[%q]", x.decl)) && d.hasFrom && d.hasTo:
			return fmt.Sprintf("A job run through %s that declares nothing is counted at %s at %s, %s at %s.",
				d.Name, mib(d.from), x.s.From, mib(d.to), x.s.To)
		case strings.Contains(d.Path, paramPath(contract.ParamGPUMemory)) && d.hasFrom && d.hasTo:
			return fmt.Sprintf("The default GPU-memory declaration of a job run through %s: %s at %s, %s at %s.", d.Name, d.From, x.s.From, d.To, x.s.To)
		}
		return ""
	}
	switch {
	case strings.Contains(d.Path, "synchronization"):
		return fmt.Sprintf("The locks %s takes: %s at %s, %s at %s.", d.Name,
			strings.Join(x.locksOf(x.from, x.fromLocks, d.Namespace, d.Name), ", "), x.s.From,
			strings.Join(x.locksOf(x.to, x.toLocks, d.Namespace, d.Name), ", "), x.s.To)
	case requestsShares(d.Path):
		return fmt.Sprintf("Each job run through %s takes %s at %s, %s at %s.", d.Name,
			shares(d.from), x.s.From, shares(d.to), x.s.To)
	case strings.HasSuffix(d.Path, ".requests.memory"):
		return fmt.Sprintf("Each job run through %s requests %s of host memory at %s, %s at %s; the queue's host-memory quota divides by it.",
			d.Name, mib(d.from), x.s.From, mib(d.to), x.s.To)
	case strings.HasSuffix(d.Path, ".activeDeadlineSeconds"):
		return fmt.Sprintf("A job's time limit: %s s at %s, %s s at %s (it counts only once the pod starts).", orNone(d.From), x.s.From, orNone(d.To), x.s.To)
	case strings.HasSuffix(d.Path, ".image"):
		return fmt.Sprintf("Jobs run through %s use image %s at %s, %s at %s.", d.Name, orNone(d.From), x.s.From, orNone(d.To), x.s.To)
	case strings.Contains(d.Path, contract.LabelKueuePriority) || strings.Contains(d.Path, "priorityClassName"):
		return fmt.Sprintf("The default priority of a job run through %s: %s at %s, %s at %s.", d.Name, orNone(d.From), x.s.From, orNone(d.To), x.s.To)
	case strings.Contains(d.Path, contract.LabelKueueQueue):
		return fmt.Sprintf("Jobs run through %s are queued in LocalQueue %s at %s, %s at %s.", d.Name, orNone(d.From), x.s.From, orNone(d.To), x.s.To)
	case strings.Contains(d.Path, "volumes") || strings.Contains(d.Path, "volumeMounts"):
		return fmt.Sprintf("The model-store mount of jobs run through %s differs.", d.Name)
	}
	return ""
}

// templateDeclares reports whether the side's version of the template (the
// step the difference is in) requests the declaration resource.
func (x *explainer) templateDeclares(s Set, d *Difference) bool {
	o := s[d.Object()]
	if o == nil {
		return false
	}
	step, ok := lookup(o.Body, "spec", "templates", stepName(d))
	if !ok {
		// Look anywhere in the object.
		return mentions(o.Body["spec"], x.decl)
	}
	for _, where := range [][]any{{"container", "resources", "requests"}, {"container", "resources", "limits"}} {
		m, _ := lookup(step, where...)
		if mm, ok := m.(map[string]any); ok {
			if _, ok := mm[x.decl]; ok {
				return true
			}
		}
	}
	return false
}

// limitDefault returns a namespace's LimitRange default for the
// declaration, as "1,024 MiB".
func (x *explainer) limitDefault(s Set, ns string) (string, bool) {
	for _, lr := range s.OfKind("LimitRange") {
		if lr.Namespace != ns {
			continue
		}
		limits, _ := lookup(lr.Body, "spec", "limits")
		items, _ := limits.([]any)
		for _, it := range items {
			if v, ok := lookup(it, "default", x.decl); ok {
				return mib(v), true
			}
		}
	}
	return "", false
}

// lockRef is one lock a template takes.
type lockRef struct{ configMap, key string }

// lockIndex is the locks of one render: the locks each WorkflowTemplate
// takes, by Ref, and the semaphore ConfigMaps they name, by Ref.
type lockIndex struct {
	byTemplate map[string][]lockRef
	semaphores map[string]bool
	templates  map[string]*Object
}

// indexLocks walks s's WorkflowTemplates once.
func indexLocks(s Set) lockIndex {
	ix := lockIndex{byTemplate: map[string][]lockRef{}, semaphores: map[string]bool{}, templates: map[string]*Object{}}
	for _, wt := range s.OfKind("WorkflowTemplate") {
		var refs []lockRef
		findLocks(wt.Body["spec"], false, &refs)
		ix.byTemplate[wt.Ref()] = refs
		ix.templates[wt.Ref()] = wt
		for _, r := range refs {
			ix.semaphores[Ref("ConfigMap", wt.Namespace, r.configMap)] = true
		}
	}
	return ix
}

func findLocks(v any, inSync bool, out *[]lockRef) {
	switch x := v.(type) {
	case map[string]any:
		if inSync {
			if ref, ok := x["configMapKeyRef"].(map[string]any); ok {
				n, _ := ref["name"].(string)
				k, _ := ref["key"].(string)
				*out = append(*out, lockRef{n, k})
			}
		}
		for _, k := range sortedMapKeys(x) {
			findLocks(x[k], inSync || k == "synchronization", out)
		}
	case []any:
		for _, y := range x {
			findLocks(y, inSync, out)
		}
	}
}

func (x *explainer) locksOf(s Set, ix lockIndex, ns, name string) []string {
	refs := ix.byTemplate[Ref("WorkflowTemplate", ns, name)]
	if len(refs) == 0 {
		return []string{"none"}
	}
	var out []string
	for _, r := range refs {
		size := ""
		if o := s[Ref("ConfigMap", ns, r.configMap)]; o != nil {
			size = str(o.Body, "data", r.key)
		}
		if size != "" {
			out = append(out, fmt.Sprintf("%s (size %s)", r.key, size))
		} else {
			out = append(out, r.key)
		}
	}
	return out
}

// takers lists the templates in ns that take lock key of configMap.
func takers(ix lockIndex, ns, configMap, key string) []string {
	var out []string
	for ref, refs := range ix.byTemplate {
		o := ix.templates[ref]
		if o.Namespace != ns {
			continue
		}
		for _, r := range refs {
			if r.configMap == configMap && r.key == key {
				out = append(out, o.Name)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// --- ConfigMaps: semaphores and the device plugin --------------------------

func isSemaphoreConfigMap(ix lockIndex, ns, name string) bool {
	return ix.semaphores[Ref("ConfigMap", ns, name)]
}

func (x *explainer) configMap(d *Difference) string {
	if isSemaphoreConfigMap(x.fromLocks, d.Namespace, d.Name) || isSemaphoreConfigMap(x.toLocks, d.Namespace, d.Name) {
		if len(d.keys) == 2 && d.keys[0] == "data" {
			key, _ := d.keys[1].(string)
			return x.lock(d, key)
		}
	}
	if strings.HasPrefix(d.Path, "data") {
		f, okF := timeSlicingReplicas(d.from)
		t, okT := timeSlicingReplicas(d.to)
		if okF || okT {
			return fmt.Sprintf("The device plugin time-slices the card into %s at %s, %s at %s; every queue's share quota should add up to it.",
				countOr(f, okF, "shares"), x.s.From, countOr(t, okT, "shares"), x.s.To)
		}
	}
	return ""
}

func (x *explainer) lock(d *Difference, key string) string {
	tf := takers(x.fromLocks, d.Namespace, d.Name, key)
	tt := takers(x.toLocks, d.Namespace, d.Name, key)
	switch {
	case d.hasFrom && d.hasTo:
		f, errF := strconv.Atoi(strings.TrimSpace(d.From))
		t, errT := strconv.Atoi(strings.TrimSpace(d.To))
		if errF != nil || errT != nil {
			return fmt.Sprintf("Lock %s: %s at %s, %s at %s.", key, d.From, x.s.From, d.To, x.s.To)
		}
		who := "the jobs that take it"
		if len(tt) > 0 {
			who = "the jobs run through " + strings.Join(tt, " and ")
		}
		atFrom := fmt.Sprintf("%s still run one at a time", who)
		if f != 1 {
			atFrom = fmt.Sprintf("up to %d of %s run at once", f, who)
		}
		atTo := fmt.Sprintf("up to %d run at once, and below the lock the queue's quota decides admission", t)
		if t == 1 {
			atTo = "they run one at a time"
		}
		return fmt.Sprintf("Lock %s holds %d at %s and %d at %s: at %s, %s; at %s, %s.",
			key, f, x.s.From, t, x.s.To, x.s.From, atFrom, x.s.To, atTo)
	case !d.hasFrom:
		if len(tf) > 0 {
			return fmt.Sprintf("%s has no lock %s, yet %s take it there: Argo cannot acquire it and those steps do not start.",
				capitalize(x.s.From), key, strings.Join(tf, " and "))
		}
		return fmt.Sprintf("Lock %s is new at %s (size %s).", key, x.s.To, d.To)
	default:
		if len(tt) > 0 {
			return fmt.Sprintf("%s removes lock %s, yet %s still take it there: Argo cannot acquire it and those steps do not start.",
				capitalize(x.s.To), key, strings.Join(tt, " and "))
		}
		return fmt.Sprintf("%s removes lock %s (size %s at %s); no template takes it there.", capitalize(x.s.To), key, d.From, x.s.From)
	}
}

// timeSlicingReplicas reads the replicas of nvidia.com/gpu from a device
// plugin config (YAML in a ConfigMap value).
func timeSlicingReplicas(v any) (int64, bool) {
	s, ok := v.(string)
	if !ok || !strings.Contains(s, "timeSlicing") {
		return 0, false
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(s), &cfg); err != nil {
		return 0, false
	}
	rs, _ := lookup(cfg, "sharing", "timeSlicing", "resources")
	items, _ := rs.([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		if m["name"] == policy.ResourceShares {
			switch n := m["replicas"].(type) {
			case float64:
				return int64(n), true
			case int64:
				return n, true
			}
		}
	}
	return 0, false
}

// --- ClusterQueues ---------------------------------------------------------

// quotaField reads a difference in a resource group, the path
// spec.resourceGroups[i].flavors[F].resources[R].FIELD: the flavor F, the
// resource R and FIELD (nominalQuota, borrowingLimit, lendingLimit); ""
// for what the path lacks.
func quotaField(d *Difference) (flavor, res, fieldName string) {
	for i := 0; i+1 < len(d.keys); i++ {
		switch d.keys[i] {
		case "flavors":
			flavor, _ = d.keys[i+1].(string)
		case "resources":
			res, _ = d.keys[i+1].(string)
		}
	}
	if last, ok := d.keys[len(d.keys)-1].(string); ok {
		fieldName = last
	}
	return flavor, res, fieldName
}

// amount is a quota of resource res in the lab's words: "8 shares",
// "12,288 MiB of host memory"; absent when the side lacks it.
func (x *explainer) amount(res string, v any, present bool, absent string) string {
	if !present {
		return absent
	}
	if policy.IsSharesResource(res) {
		return shares(v)
	}
	return quantity(res, v, x.decl) + " of " + resourceWord(res, x.decl)
}

func (x *explainer) clusterQueue(d *Difference) string {
	flavor, res, fieldName := quotaField(d)
	cohort := str(x.to[d.Object()].Body, "spec", "cohortName")
	if cohort == "" {
		cohort = str(x.to[d.Object()].Body, "spec", "cohort")
	}
	amount := func(v any, present bool, absent string) string { return x.amount(res, v, present, absent) }
	if res != "" && flavor != "" {
		switch fieldName {
		case "nominalQuota":
			return fmt.Sprintf("ClusterQueue %s owns %s on %s at %s, %s at %s: what it admits without borrowing, and what it can lend to cohort %s.",
				d.Name, amount(d.from, d.hasFrom, "nothing"), flavor, x.s.From, amount(d.to, d.hasTo, "nothing"), x.s.To, orNone(cohort))
		case "borrowingLimit":
			return fmt.Sprintf("ClusterQueue %s may borrow %s on %s from cohort %s beyond what it owns at %s, %s at %s.",
				d.Name, amount(d.from, d.hasFrom, "without limit"), flavor, orNone(cohort), x.s.From, amount(d.to, d.hasTo, "without limit"), x.s.To)
		case "lendingLimit":
			return fmt.Sprintf("ClusterQueue %s lends cohort %s at most %s of what it leaves unused on %s at %s, %s at %s.",
				d.Name, orNone(cohort), amount(d.from, d.hasFrom, "all"), flavor, x.s.From, amount(d.to, d.hasTo, "all"), x.s.To)
		}
		if !d.hasFrom || !d.hasTo {
			return fmt.Sprintf("ClusterQueue %s accounts %s on %s only at %s.", d.Name, resourceWord(res, x.decl), flavor, sideOf(d, x.s))
		}
	}
	switch {
	case strings.HasSuffix(d.Path, "coveredResources"):
		if countsDecl(d.from, x.decl) != countsDecl(d.to, x.decl) {
			if countsDecl(d.to, x.decl) {
				return fmt.Sprintf("At %s, ClusterQueue %s does not count GPU-memory declarations (%s), so no quota limits them; %s does.", x.s.From, d.Name, x.decl, x.s.To)
			}
			return fmt.Sprintf("%s stops ClusterQueue %s from counting GPU-memory declarations (%s): no quota limits them any more.", capitalize(x.s.To), d.Name, x.decl)
		}
		return fmt.Sprintf("The resources ClusterQueue %s accounts: %s at %s, %s at %s.", d.Name, d.From, x.s.From, d.To, x.s.To)
	case d.Path == "spec.cohortName" || d.Path == "spec.cohort":
		return fmt.Sprintf("ClusterQueue %s is in cohort %s at %s, %s at %s: it borrows from and lends to the queues of its cohort only; with none it admits nothing beyond its own quota.",
			d.Name, orNone(d.From), x.s.From, orNone(d.To), x.s.To)
	case strings.HasPrefix(d.Path, "spec.preemption"):
		return x.preemption(d)
	case strings.HasPrefix(d.Path, "spec.namespaceSelector"):
		return fmt.Sprintf("Which namespaces' LocalQueues may point at ClusterQueue %s differs.", d.Name)
	}
	return ""
}

func countsDecl(v any, decl string) bool {
	items, _ := v.([]any)
	for _, it := range items {
		if it == decl {
			return true
		}
	}
	return false
}

func (x *explainer) preemption(d *Difference) string {
	if strings.HasSuffix(d.Path, ".maxPriorityThreshold") {
		return fmt.Sprintf("While borrowing, ClusterQueue %s may preempt jobs of priority up to %s at %s, up to %s at %s.",
			d.Name, priorityName(x.from, d.From), x.s.From, priorityName(x.to, d.To), x.s.To)
	}
	what := map[string]string{
		"withinClusterQueue":  "whether a pending job may preempt lower-priority jobs in its own ClusterQueue",
		"reclaimWithinCohort": "whether it reclaims its lent quota by preempting borrowers in the cohort",
		"borrowWithinCohort":  "whether, while borrowing, it may preempt jobs in other queues of the cohort (Kueue only preempts in queues above their nominal quota)",
	}
	for k, w := range what {
		if strings.Contains(d.Path, "."+k) {
			return fmt.Sprintf("Preemption of ClusterQueue %s, %s: %s at %s, %s at %s.", d.Name, w, orNever(d.From), x.s.From, orNever(d.To), x.s.To)
		}
	}
	return fmt.Sprintf("Preemption of ClusterQueue %s: %s at %s, %s at %s.", d.Name, orNever(d.From), x.s.From, orNever(d.To), x.s.To)
}

// --- priorities and LimitRanges --------------------------------------------

func (x *explainer) priority(d *Difference) string {
	if d.Path != "value" {
		return ""
	}
	of := ladder(x.from)
	ot := ladder(x.to)
	if strings.Join(of, ">") == strings.Join(ot, ">") {
		return fmt.Sprintf("Priority %s: %s at %s, %s at %s. The ladder's order is unchanged (%s), so admission and preemption decide the same way: Kueue compares values only.",
			d.Name, d.From, x.s.From, d.To, x.s.To, strings.Join(ot, " > "))
	}
	return fmt.Sprintf("Priority %s: %s at %s, %s at %s, which reorders the ladder: %s at %s, %s at %s; who preempts whom changes with it.",
		d.Name, d.From, x.s.From, d.To, x.s.To, strings.Join(of, " > "), x.s.From, strings.Join(ot, " > "), x.s.To)
}

// priorityName shows a priority value with the WorkloadPriorityClasses
// that have it: "10 (batch)".
func priorityName(s Set, v string) string {
	if v == "" {
		return "any (no threshold)"
	}
	var names []string
	for _, o := range s.OfKind("WorkloadPriorityClass") {
		if str(o.Body, "value") == v {
			names = append(names, o.Name)
		}
	}
	if len(names) == 0 {
		return v
	}
	return v + " (" + strings.Join(names, ", ") + ")"
}

// ladder is the WorkloadPriorityClasses from the highest value down.
func ladder(s Set) []string {
	type rung struct {
		name string
		v    float64
	}
	var rs []rung
	for _, o := range s.OfKind("WorkloadPriorityClass") {
		v, _ := strconv.ParseFloat(str(o.Body, "value"), 64)
		rs = append(rs, rung{o.Name, v})
	}
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].v != rs[j].v {
			return rs[i].v > rs[j].v
		}
		return rs[i].name < rs[j].name
	})
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.name
	}
	return out
}

func (x *explainer) limitRange(d *Difference) string {
	if strings.Contains(d.Path, fmt.Sprintf(".default[%q]", x.decl)) {
		return fmt.Sprintf("A job in %s that declares no GPU memory is counted at %s at %s, %s at %s.",
			d.Namespace, orZero(d.from, d.hasFrom), x.s.From, orZero(d.to, d.hasTo), x.s.To)
	}
	return ""
}

func orZero(v any, present bool) string {
	if !present {
		return "nothing (no default)"
	}
	return mib(v)
}

// --- objects only on one side ----------------------------------------------

func (x *explainer) added(d *Difference) string {
	at := x.s.From
	switch d.Kind {
	case "WorkflowTemplate":
		return fmt.Sprintf("%s has no WorkflowTemplate %s: workflows that reference it fail there.", capitalize(at), d.Name)
	case "LocalQueue":
		return fmt.Sprintf("%s has no LocalQueue %s in %s: jobs there that name it are never admitted.", capitalize(at), d.Name, d.Namespace)
	case "ClusterQueue":
		return fmt.Sprintf("%s has no ClusterQueue %s: LocalQueues that point at it admit nothing.", capitalize(at), d.Name)
	case "Cohort":
		return fmt.Sprintf("%s has no Cohort %s: the ClusterQueues and Cohorts that name it share only what they lend each other (an implicit cohort), without its quota or its parent's.", capitalize(at), d.Name)
	case "WorkloadPriorityClass":
		return fmt.Sprintf("%s has no priority %s: workloads that name it are rejected there.", capitalize(at), d.Name)
	case "ResourceFlavor":
		return fmt.Sprintf("%s has no ResourceFlavor %s: queues that name it admit nothing on that card.", capitalize(at), d.Name)
	case "LimitRange":
		return fmt.Sprintf("%s has no LimitRange in %s: a job there that declares no GPU memory is counted as declaring none, so it takes no GPU-memory quota at all.", capitalize(at), d.Namespace)
	case "Namespace":
		return fmt.Sprintf("%s has no namespace %s.", capitalize(at), d.Name)
	case "ConfigMap":
		if isSemaphoreConfigMap(x.toLocks, d.Namespace, d.Name) {
			return fmt.Sprintf("%s has no semaphore ConfigMap %s: steps that take its locks cannot acquire them there.", capitalize(at), d.Name)
		}
	}
	return ""
}

func (x *explainer) removed(d *Difference) string {
	return fmt.Sprintf("%s no longer renders %s %s; a sync that prunes removes it when the pin moves.", capitalize(x.s.To), d.Kind, d.Name)
}

// --- formatting ------------------------------------------------------------

// mib prints a memory quantity of a manifest in the lab's words
// (policy.DescribeMemory): "1,024 MiB"; a plain integer is bytes.
func mib(v any) string { return policy.DescribeMemory(v) }

// quantity prints an amount of resource res: shares for the shares
// resource, MiB for memory and the declaration.
func quantity(res string, v any, decl string) string {
	switch {
	case policy.IsSharesResource(res):
		return shares(v)
	case res == policy.ResourceHostMemory, res == decl:
		return mib(v)
	}
	return fmt.Sprint(v)
}

func shares(v any) string {
	n, err := strconv.ParseInt(fmt.Sprint(v), 10, 64)
	if err != nil {
		return fmt.Sprint(v) + " shares"
	}
	return policy.FormatAmount(policy.Shares, n)
}

func resourceWord(res, decl string) string {
	switch {
	case policy.IsSharesResource(res):
		return "shares (" + res + ")"
	case res == policy.ResourceHostMemory:
		return "host memory"
	case res == decl:
		return "declared GPU memory (" + res + ")"
	}
	return res
}

// paramPath is how a difference's path names a WorkflowTemplate parameter.
func paramPath(name string) string { return "parameters[" + name + "]" }

// requestsShares reports a path that ends at a container's request for
// shares (either name of the shares resource).
func requestsShares(path string) bool {
	for _, rename := range []bool{false, true} {
		if strings.HasSuffix(path, fmt.Sprintf(".requests[%q]", policy.SharesResourceName(rename))) {
			return true
		}
	}
	return false
}

func countOr(n int64, ok bool, unit string) string {
	if !ok {
		return "no time-slicing"
	}
	return fmt.Sprintf("%d %s", n, unit)
}

func sideOf(d *Difference, s Sides) string {
	if d.hasFrom {
		return s.From
	}
	return s.To
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orNever(s string) string {
	if s == "" {
		return "unset (Never)"
	}
	return s
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func sortedMapKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
