package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/evalmesh/evalmesh/attest"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/tasks"
)

// Runners without labels in the demo network (ledger.scorers; attest/scorers.go): one task
// is sealed, its key granted only to the labs that score it, and its slots are run by the
// others, whose runs sign the submission and no score.

// SealScoredBy seals the task bundle src into out and makes the labs scorers (indexes into
// Nodes) its only key holders and scorers: SealGrantedTo(scorers), and the network document
// names the scorers for the sealed bundle's CID and is signed again by every lab. Call it
// before the daemons start; it returns the sealed bundle's CID.
func (ls *Labs) SealScoredBy(ctx context.Context, src, out string, scorers []int) (string, error) {
	if len(scorers) == 0 || len(scorers) >= len(ls.Nodes) {
		return "", fmt.Errorf("scoring labs: %d of %d labs; leave at least one lab to run the task", len(scorers), len(ls.Nodes))
	}
	bundle, err := ls.sealGranted(ctx, src, out, scorers)
	if err != nil {
		return "", err
	}
	var names []string
	for _, s := range scorers {
		names = append(names, ls.Nodes[s].Name)
	}
	return bundle, ls.signDocAgain(func(doc *protocol.NetworkDoc) {
		if doc.Ledger.Scorers == nil {
			doc.Ledger.Scorers = map[string][]string{}
		}
		doc.Ledger.Scorers[bundle] = names
	})
}

// SealGrantedTo seals the task bundle src into out and grants its key to the labs holders
// (indexes into Nodes) alone: every lab gets an age identity (HOME/lab-age.key, its
// recipient in the document and trust file), the first holder's node grants the key to each
// holder (the grants go to its HOME/attestations, which its daemon imports at start), and
// the document is signed again by every lab. Call it before the daemons start; it returns
// the sealed bundle's CID.
func (ls *Labs) SealGrantedTo(ctx context.Context, src, out string, holders []int) (string, error) {
	if len(holders) == 0 {
		return "", fmt.Errorf("no lab to grant the sealed bundle's key to")
	}
	bundle, err := ls.sealGranted(ctx, src, out, holders)
	if err != nil {
		return "", err
	}
	return bundle, ls.signDocAgain(func(*protocol.NetworkDoc) {})
}

// sealGranted is SealGrantedTo before the document is signed again.
func (ls *Labs) sealGranted(ctx context.Context, src, out string, holders []int) (string, error) {
	ids := make([]*age.X25519Identity, len(ls.Nodes))
	for i, n := range ls.Nodes {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			return "", err
		}
		if err := attest.WriteAgeIdentity(n.Home.LabAgeKeyPath(), id); err != nil {
			return "", err
		}
		if err := ls.Trust.SetAgeRecipient(n.Lab.ID, id.Recipient().String()); err != nil {
			return "", err
		}
		for j := range ls.Doc.Labs {
			if ls.Doc.Labs[j].Name == n.Name {
				ls.Doc.Labs[j].AgeRecipient = id.Recipient().String()
			}
		}
		ids[i] = id
	}
	key, err := tasks.Seal(src, out)
	if err != nil {
		return "", err
	}
	c, err := tasks.BundleCID(ctx, out)
	if err != nil {
		return "", err
	}
	bundle := c.String()
	sealer := ls.Nodes[holders[0]].Home
	nodeKey, err := sealer.Identity()
	if err != nil {
		return "", err
	}
	cert, err := attest.LoadNodeCert(sealer.CertPath())
	if err != nil {
		return "", err
	}
	for _, s := range holders {
		n := ls.Nodes[s]
		env, id, err := attest.NewGrant(nodeKey, cert, bundle, n.Lab.ID, ids[s].Recipient().String(), key.String(), time.Now())
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(sealer.AttestationsDir(), 0o755); err != nil {
			return "", err
		}
		if err := home.WriteFileAtomic(filepath.Join(sealer.AttestationsDir(), id+".json"), env, 0o644); err != nil {
			return "", err
		}
	}
	return bundle, nil
}

// signDocAgain applies edit to the network document, has every lab sign it again and writes
// it, with the trust file, into every home.
func (ls *Labs) signDocAgain(edit func(*protocol.NetworkDoc)) error {
	edit(ls.Doc)
	again, err := protocol.ParseNetworkDoc(ls.Doc.Canonical())
	if err != nil {
		return err
	}
	again.Signatures = []protocol.NetworkSignature{}
	for _, n := range ls.Nodes {
		if err := again.Sign(n.Name, n.Lab); err != nil {
			return err
		}
	}
	ls.Doc = again
	for _, n := range ls.Nodes {
		if err := ls.Trust.Save(n.Home.TrustPath()); err != nil {
			return err
		}
		if err := home.WriteFileAtomic(n.Home.NetworkDocPath(), ls.Doc.File(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ScoredTask is the demo's task run by labs without its labels.
const ScoredTask = "arithmetic"

// scoredTask is the demo's sealed task: its name, its sealed copy and CID, its scorers.
type scoredTask struct {
	name, sealed, cid string
	scorers           []string
}

// sealScoredTask seals ScoredTask for the demo network before its daemons start, scored by
// the first lab (and the second, with three labs or more) and run by the others; nil when
// the demo runs without it or on fewer than two labs.
func sealScoredTask(ctx context.Context, labs *Labs, dir string, taskNames []string, log io.Writer) (*scoredTask, error) {
	if len(labs.Nodes) < 2 || !slices.Contains(taskNames, ScoredTask) {
		return nil, nil
	}
	src := filepath.Join(dir, "examples", "sealed-src")
	if _, err := exampletasks.Generate(src); err != nil {
		return nil, err
	}
	scorers := []int{0}
	if len(labs.Nodes) >= 3 {
		scorers = []int{0, 1}
	}
	st := &scoredTask{name: ScoredTask, sealed: filepath.Join(dir, "examples", ScoredTask+".sealed")}
	var err error
	if st.cid, err = labs.SealScoredBy(ctx, filepath.Join(src, ScoredTask), st.sealed, scorers); err != nil {
		return nil, err
	}
	for _, i := range scorers {
		st.scorers = append(st.scorers, labs.Nodes[i].Name)
	}
	fmt.Fprintf(log, "task %s sealed (%s): its key granted to %s only, which score it; the other labs run it without its labels (ledger.scorers)\n",
		ScoredTask, st.cid, strings.Join(st.scorers, ", "))
	return st, os.RemoveAll(src)
}

// install puts the sealed copy in place of the clear task in tasksDir (the folder the
// ledger command reads: its CID is the sealed bundle's).
func (st *scoredTask) install(tasksDir string) error {
	if st == nil {
		return nil
	}
	dst := filepath.Join(tasksDir, st.name)
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return os.Rename(st.sealed, dst)
}

// policy is what the demo's policy line adds for the sealed task.
func (st *scoredTask) policy() string {
	if st == nil {
		return ""
	}
	return fmt.Sprintf("; %s sealed, scored only by %s, run by the other labs without its labels", st.name, strings.Join(st.scorers, ", "))
}

// unscored says whether bundle is the sealed task: its runs carry no score of their own.
func (st *scoredTask) unscored(bundle string) bool { return st != nil && st.cid == bundle }
