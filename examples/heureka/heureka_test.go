package heurekaexample

import (
	"bytes"
	"testing"

	"github.com/evalmesh/evalmesh/tasks"
)

func TestExampleBundleIsStableAndChecks(t *testing.T) {
	a, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Files()
	for k := range a {
		if !bytes.Equal(a[k], b[k]) {
			t.Fatalf("%s differs between two generations", k)
		}
	}
	dir, err := Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if rep := tasks.Check(dir, tasks.CheckOptions{}); !rep.OK {
		t.Fatalf("example bundle fails task check: %v", rep.Problems)
	}
	if len(Items()) != 10 {
		t.Fatalf("%d questions, want 10", len(Items()))
	}
}
