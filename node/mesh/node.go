package mesh

import (
	"context"
	"time"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// Node is what the loop needs of the node it runs in: the transport (gossip, peers,
// reconciliation, blocks and bundles), the heads it announces and hears, and the
// verification the store gives campaigns. The node implements it (the wiring); a test
// may fake it. Every method is safe for concurrent use.
type Node interface {
	// ID is this node's peer ID; Peers lists the peers connected now.
	ID() peer.ID
	Peers() []peer.ID
	// JoinGossip starts gossipsub with one validator per topic kind (validators, or values
	// for the kinds whose validator hands on what it verified: Message.Value); the loop
	// subscribes to and publishes on those kinds only.
	JoinGossip(ctx context.Context, validators map[string]protocol.ValidatorFunc, values map[string]protocol.ValueValidatorFunc) (Gossip, error)
	// RunSync reconciles with a random peer every interval until ctx ends; SyncWith
	// reconciles with p once. Both do nothing on a node without a syncer.
	RunSync(ctx context.Context, clk clock.Clock, interval time.Duration)
	SyncWith(ctx context.Context, p peer.ID) error

	// ObserveHead validates and records a /heads message of sender.
	ObserveHead(raw []byte, sender peer.ID, now time.Time) protocol.Validation
	// SignedHead is this node's head, signed, for lab (its root the last SetHeadRoot).
	SignedHead(lab string) ([]byte, error)
	// SetHeadRoot records the ledger root computed for the set whose fingerprint is fp.
	SetHeadRoot(root string, fp recon.Fingerprint)
	// SetHeadsClock sets the clock heads are aged by and the interval they are announced at.
	SetHeadsClock(now func() time.Time, interval time.Duration)
	// PeerHeads is every peer's latest head; SetDocumentVerdict records the loop's
	// network-document vote over them (LedgerStatus, doctor).
	PeerHeads() []protocol.PeerHead
	SetDocumentVerdict(v protocol.DocumentVerdict)
	// NetworkDoc reads the home's network document again (nil, nil without one).
	NetworkDoc() (*protocol.NetworkDoc, error)
	// StoredCampaign verifies a stored campaign envelope as the store's verifier does.
	StoredCampaign(env []byte) (*protocol.VerifiedCampaign, error)

	// BundleDir returns the unpacked bundle c, fetching it from peers first when the home
	// lacks it; callers serialise fetches of one CID.
	BundleDir(ctx context.Context, c cid.Cid) (string, error)
	// PutBlock stores b durably (synced before it returns); GetBlock gets a block locally
	// or from the connected peers.
	PutBlock(ctx context.Context, b blocks.Block) error
	GetBlock(ctx context.Context, c cid.Cid) (blocks.Block, error)
	// EnsureAgentImage makes spec's image present in the runner's engine (fetched by its
	// image_cid when the engine lacks it); nothing for an executor without images.
	EnsureAgentImage(ctx context.Context, spec *agentspec.Spec) error
}

// Gossip is the node's gossipsub as the loop uses it.
type Gossip interface {
	Publish(ctx context.Context, kind string, data []byte) error
	// Subscribe delivers kind's validated messages, this node's own included (Local), until
	// ctx ends or cancel is called; the channel is then closed.
	Subscribe(ctx context.Context, kind string) (msgs <-chan Message, cancel func(), err error)
	// CountDrop counts a message the loop dropped before publishing it, under reason.
	CountDrop(reason string)
	Close() error
}

// Message is a validated message as the loop reads it: its author and its bytes.
type Message struct {
	From  peer.ID
	Data  []byte
	Local bool // published by this node
	// Value is what the topic's value validator verified Data into (a
	// *protocol.VerifiedCampaign on the campaigns topic); nil on other topics.
	Value any
}

// Metrics is what the loop counts in the node's metrics (/metrics).
type Metrics interface {
	Claim(direction, kind string)
	Signed(p attest.RunPredicate)
	// RunEnded: o is the coordinator's view of the outcome (RunGivenUp where another node
	// holds the attempt); abortReason is the AbortRun's reason when aborted.
	RunEnded(o protocol.RunOutcome, aborted bool, abortReason string)
	LedgerSeconds(s float64)
	ClaimingStopped(why string)
}

// noMetrics counts nothing (Options.Metrics unset).
type noMetrics struct{}

func (noMetrics) Claim(string, string)                       {}
func (noMetrics) Signed(attest.RunPredicate)                 {}
func (noMetrics) RunEnded(protocol.RunOutcome, bool, string) {}
func (noMetrics) LedgerSeconds(float64)                      {}
func (noMetrics) ClaimingStopped(string)                     {}
