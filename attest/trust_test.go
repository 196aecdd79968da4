package attest

import (
	"strings"
	"testing"
)

// Trust files travel between labs: hostile shapes are refused with an error (never a panic,
// never an expansion that eats memory). The fuzzer's slow phases were its minimizer, not
// these (see FuzzParseTrust).
func TestParseTrustHostileShapes(t *testing.T) {
	bomb := "version: 1\nrevocations:\n  - a: &a [x,x,x,x,x,x,x,x,x,x]\n    b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n" +
		"    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n    d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n" +
		"    e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n    f: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
	for _, c := range []struct{ name, in, says string }{
		{"alias bomb", bomb, "aliasing"},
		{"deep flow nesting", "version: 1\nrevocations:\n  - a: " + strings.Repeat("[", 10000), "yaml"},
		{"deep map nesting", "version: 1\nrevocations:\n  - a: " + strings.Repeat("{a: ", 10000), "yaml"},
		{"many empty revocations", "version: 1\nrevocations:\n" + strings.Repeat("  - payload: x\n", 10000), "revocations[0]"},
		{"unknown field", "version: 1\nlabz: []\n", "labz"},
		{"no version", "labs: []\n", "version"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseTrust([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("error %v, want one mentioning %q", err, c.says)
			}
		})
	}
}
