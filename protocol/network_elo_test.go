package protocol

import (
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/scoring"
)

// ledger.elo_bootstrap travels to the scoring options; the default, written or not, keeps
// the canonical form (and so the hash) of a document without the field; the other policy
// changes the hash; an unknown one is refused naming the field.
func TestNetworkDocEloBootstrap(t *testing.T) {
	d := testDoc(t)
	if strings.Contains(string(d.Canonical()), "elo_bootstrap") || d.ScoringOptions().EloBootstrap != "" {
		t.Fatalf("default Elo bootstrap in the canonical form: %s", d.Canonical())
	}
	with := func(v string) string {
		return strings.Replace(string(d.Canonical()), `"replication":1`, `"replication":1,"elo_bootstrap":"`+v+`"`, 1)
	}
	games, err := ParseNetworkDoc([]byte(with("games")))
	if err != nil {
		t.Fatal(err)
	}
	if games.Hash() != d.Hash() {
		t.Fatal(`"elo_bootstrap": "games" changed the document's hash`)
	}
	tl, err := ParseNetworkDoc([]byte(with(scoring.EloBootstrapTasksLinearised)))
	if err != nil {
		t.Fatal(err)
	}
	if tl.Hash() == d.Hash() || tl.ScoringOptions().EloBootstrap != scoring.EloBootstrapTasksLinearised {
		t.Fatalf("tasks-linearised: hash %s (default %s), options %+v", tl.Hash(), d.Hash(), tl.ScoringOptions())
	}
	if again, err := ParseNetworkDoc(tl.Canonical()); err != nil || again.Hash() != tl.Hash() {
		t.Fatalf("canonical form does not round-trip: %v", err)
	}
	if _, err := ParseNetworkDoc([]byte(with("tasks"))); err == nil || !strings.Contains(err.Error(), "ledger.elo_bootstrap") {
		t.Fatalf("unknown policy: %v", err)
	}
}
