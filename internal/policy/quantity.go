package policy

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Quantities: the one place that converts between the policy's units and
// Kubernetes quantities. The policy holds host and GPU memory in MiB and
// shares as a count. A Kubernetes object carries a resource.Quantity, in
// which a plain integer is bytes: "1024" is 1,024 bytes, "1024Mi" is
// 1,024 MiB. Only the policy's GPU-memory fields read a plain integer as MiB
// (schema #GPUMemory); everything read from a Kubernetes object (a render,
// the cluster, a Workload) reads it as bytes, as the API server does.

// bytesPerMiB is one mebibyte.
const bytesPerMiB = 1 << 20

// MiBQuantity returns mib MiB as a Kubernetes quantity in binary SI. It
// prints canonically: 1,024 MiB as "1Gi", 12,200 MiB as "12200Mi".
func MiBQuantity(mib int64) resource.Quantity {
	return *resource.NewQuantity(mib*bytesPerMiB, resource.BinarySI)
}

// MiBString writes mib MiB as "NMi" ("12452Mi"): the form of the gpu-memory
// parameter a GPU step declares through. Never a plain integer, which
// Kubernetes would read as bytes.
func MiBString(mib int64) string { return strconv.FormatInt(mib, 10) + "Mi" }

// QuantityMiB converts a Kubernetes memory quantity to MiB, rounded down,
// and reports whether it is a whole number of MiB. A plain integer is bytes:
// "1024" is 1,024 bytes, 0 MiB, not whole.
func QuantityMiB(q resource.Quantity) (mib int64, whole bool) {
	b := q.Value()
	return b / bytesPerMiB, b%bytesPerMiB == 0
}

// DescribeMemory prints a memory quantity from a Kubernetes object (a
// resource.Quantity, a string or a decoded number) in the lab's words:
// "1,024 MiB" when it is a whole number of MiB, else in bytes ("1,024
// bytes": a plain 1024 in a manifest is bytes, never MiB). What does not
// parse is printed as it is.
func DescribeMemory(v any) string {
	q, ok := v.(resource.Quantity)
	if !ok {
		var err error
		if q, err = resource.ParseQuantity(fmt.Sprint(v)); err != nil {
			return fmt.Sprint(v)
		}
	}
	if mib, whole := QuantityMiB(q); whole {
		return FormatAmount(GPUMemory, mib)
	}
	b := q.Value()
	if b == 1 {
		return "1 byte"
	}
	return Thousands(b) + " bytes"
}

// Quantity returns an amount of the kind, in its unit (shares, or MiB), as
// a Kubernetes quantity: shares as a count ("4"), host and GPU memory in
// binary SI ("8Gi", "404Mi").
func (k Kind) Quantity(v int64) resource.Quantity {
	if k == Shares {
		return *resource.NewQuantity(v, resource.DecimalSI)
	}
	return MiBQuantity(v)
}

// QuantityString is Quantity printed: "4", "8Gi", "404Mi", "16311Mi".
func (k Kind) QuantityString(v int64) string {
	q := k.Quantity(v)
	return q.String()
}

// ParseMiB parses a host-memory quantity as the policy writes it ("0",
// "NMi" or "NGi") into MiB.
func ParseMiB(s string) (int64, error) {
	mult := int64(1)
	num := s
	switch {
	case s == "0":
		return 0, nil
	case strings.HasSuffix(s, "Gi"):
		mult, num = 1024, strings.TrimSuffix(s, "Gi")
	case strings.HasSuffix(s, "Mi"):
		num = strings.TrimSuffix(s, "Mi")
	default:
		return 0, fmt.Errorf("memory quantity %q: want Mi or Gi", s)
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memory quantity %q: %v", s, err)
	}
	return v * mult, nil
}

// parseGPUMemory parses a GPU-memory quantity the policy writes as a
// string: "NMi", or "0". (A plain integer, the other form #GPUMemory allows,
// is a JSON number and MiB; see gpuMem.)
func parseGPUMemory(s string) (int64, error) {
	if s != "0" && !strings.HasSuffix(s, "Mi") {
		return 0, fmt.Errorf("GPU memory %q is not \"NMi\"", s)
	}
	mib, err := ParseMiB(s)
	if err != nil {
		return 0, fmt.Errorf("GPU memory %q is not \"NMi\"", s)
	}
	return mib, nil
}
