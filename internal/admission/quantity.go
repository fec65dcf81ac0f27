package admission

import (
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// Quantity prints an amount of a kind as a Kubernetes quantity: shares as a
// count ("4"), host and GPU memory, held in MiB, in binary SI ("8Gi",
// "404Mi", "16311Mi"). GPU-memory declarations reach Kubernetes with the Mi
// suffix: a plain 404 would be 404 bytes.
func Quantity(k policy.Kind, v int64) string {
	if k == policy.Shares {
		return strconv.FormatInt(v, 10)
	}
	return resource.NewQuantity(v*1024*1024, resource.BinarySI).String()
}

// MiB parses a memory quantity string back to MiB (rounded down), for
// consumers of the JSON contract; shares parse as plain counts.
func MiB(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, err
	}
	return q.Value() / (1024 * 1024), nil
}
