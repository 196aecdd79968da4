package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The bar shows the bytes done and the total, not only a percentage and a rate (moved from
// cmd/evalmesh's TestNodeProgressShowsBytes).
func TestBarShowsBytes(t *testing.T) {
	var buf bytes.Buffer
	b := &Bar{w: &buf, what: "fetch"}
	b.Set(5<<20, 10<<20)
	if out := buf.String(); !strings.Contains(out, "5.0/10 MB") && !strings.Contains(out, "5.2/10 MB") {
		t.Fatalf("progress line %q does not show bytes done/total", out)
	}
	b.Finish()
	b.Set(1, 2) // after Finish: nothing, no panic
}

// Off a terminal nothing is drawn: a buffer or a pipe gets no bytes.
func TestBarSilentOffTerminal(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "x")
	b.Set(1, 2)
	b.Finish()
	if buf.Len() != 0 {
		t.Fatalf("drew %q on a buffer", buf.String())
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if On(w) {
		t.Fatal("a pipe counted as a terminal")
	}
}
