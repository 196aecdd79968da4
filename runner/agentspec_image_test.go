package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/agentspec"
)

func TestSetSpecImageKeepsTheRest(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent.yaml")
	orig := "# my agent\nname: solver\nversion: \"1.0.0\"\ncommand: [\"/agent\"] # argv\nenv:\n  MODEL: m\n"
	if err := os.WriteFile(p, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	img := "sha256:" + strings.Repeat("ab", 32)
	cidStr := agentspec.RawCID([]byte("tar"))
	if err := SetSpecImage(p, img, cidStr); err != nil {
		t.Fatal(err)
	}
	s, err := agentspec.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if s.Image != img || s.ImageCID != cidStr || s.Env["MODEL"] != "m" || s.Command[0] != "/agent" {
		t.Fatalf("spec after SetSpecImage: %+v", s)
	}
	raw, _ := os.ReadFile(p)
	if !strings.Contains(string(raw), "# my agent") || !strings.Contains(string(raw), "# argv") {
		t.Errorf("comments lost:\n%s", raw)
	}
	// Again with a new CID: replaced, not appended twice.
	cid2 := agentspec.RawCID([]byte("tar2"))
	if err := SetSpecImage(p, "", cid2); err != nil {
		t.Fatal(err)
	}
	if s, err = agentspec.Load(p); err != nil || s.ImageCID != cid2 || s.Image != img {
		t.Fatalf("second SetSpecImage: %+v, %v", s, err)
	}
}
