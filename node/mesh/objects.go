package mesh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/runner"
)

// objects moves a node's objects between HOME, its blockstore and its peers: task bundles
// unpacked under HOME/bundles (one fetch per CID at a time), a run's objects put as blocks
// and its attestation stored, a submission fetched to re-score. Any goroutine calls it;
// mu guards bundles, and each bundle's lock is held for its fetch.
type objects struct {
	*shared
	mu      sync.Mutex
	bundles map[string]*sync.Mutex // per-CID fetch lock
}

// ingestRun stores the objects a run attestation names (from HOME/objects) as raw blocks,
// then the attestation itself.
func (o *objects) ingestRun(ctx context.Context, env []byte) error {
	e, err := attest.DecodeEnvelope(env)
	if err != nil {
		return err
	}
	st, _, _, err := attest.DecodeStatement(e.Payload)
	if err != nil {
		return err
	}
	for _, sub := range st.Subject {
		cs, _ := sub.Annotations[attest.AnnotationCID].(string)
		if cs == "" {
			continue
		}
		if err := o.putObject(ctx, cs); err != nil {
			return err
		}
		if r, _ := sub.Annotations[attest.AnnotationRole].(string); r == attest.RoleTranscript {
			if err := o.putTranscriptBodies(ctx, cs); err != nil {
				return err
			}
		}
	}
	res, err := o.store.Attestations().Add([][]byte{env}, vstore.SourceLocal, "")
	if err != nil {
		return err
	}
	if len(res) == 1 && res[0].Status == vstore.StatusRefused {
		return fmt.Errorf("own attestation %s refused by the store: %s %s", res[0].ID, res[0].Reason, res[0].Detail)
	}
	return nil
}

// putTranscriptBodies stores the bodies a run's transcript lists (from HOME/objects, where
// the runner put them) as blocks beside it, so the run page and other labs can read them.
func (o *objects) putTranscriptBodies(ctx context.Context, cs string) error {
	doc, err := os.ReadFile(filepath.Join(runner.ObjectsDir(o.opts.Home), cs))
	if err != nil {
		return err
	}
	t, err := attest.ParseTranscript(doc)
	if err != nil {
		return fmt.Errorf("own transcript %s: %w", cs, err)
	}
	for _, c := range t.Calls {
		for _, b := range []attest.TranscriptBody{c.Request, c.Response} {
			if b.CID == "" {
				continue
			}
			if err := o.putObject(ctx, b.CID); err != nil {
				return fmt.Errorf("transcript %s body %s: %w", cs, b.CID, err)
			}
		}
	}
	return nil
}

func (o *objects) putObject(ctx context.Context, cs string) error {
	c, err := cid.Decode(cs)
	if err != nil {
		return fmt.Errorf("object CID %q: %w", cs, err)
	}
	data, err := os.ReadFile(filepath.Join(runner.ObjectsDir(o.opts.Home), cs))
	if err != nil {
		return err
	}
	b, err := blocks.NewBlockWithCid(data, c)
	if err != nil {
		return err
	}
	return o.node.PutBlock(ctx, b)
}

// fetchObject gets a raw block by CID (locally or from connected peers) and checks it
// against the attested sha256.
func (o *objects) fetchObject(ctx context.Context, cs, sum string) ([]byte, error) {
	c, err := cid.Decode(cs)
	if err != nil {
		return nil, fmt.Errorf("submission CID %q: %w", cs, err)
	}
	ctx, cancel := clock.WithTimeout(ctx, o.opts.Clock, o.opts.Timing.ObjectFetch)
	defer cancel()
	b, err := o.node.GetBlock(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("fetch submission %s from peers: %w", cs, err)
	}
	got := sha256.Sum256(b.RawData())
	if sum != "" && hex.EncodeToString(got[:]) != sum {
		return nil, fmt.Errorf("submission %s does not match its attested sha256", cs)
	}
	return b.RawData(), nil
}

// bundleDir returns the unpacked bundle of a task CID under HOME/bundles, fetching it from
// peers first if this node does not have it (one fetch per CID at a time).
func (o *objects) bundleDir(ctx context.Context, cs string) (string, error) {
	c, err := cid.Decode(cs)
	if err != nil {
		return "", fmt.Errorf("task CID %q: %w", cs, err)
	}
	o.mu.Lock()
	mu := o.bundles[c.String()]
	if mu == nil {
		mu = &sync.Mutex{}
		o.bundles[c.String()] = mu
	}
	o.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	return o.node.BundleDir(ctx, c)
}
