package api

import (
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
)

// The answers of the API: every JSON shape docs/api.md documents. Package node names each
// under its old name (type aliases), so its Go API and the CLI read them as before.

// PeerInfo describes one connected peer.
type PeerInfo struct {
	ID   string `json:"peer_id"`
	Addr string `json:"addr"`
	// HeadAgeSeconds is how long ago the peer's last head was heard (nil: none heard);
	// HeadStale says it is older than the staleness bound (docs/protocol-sync.md §5).
	HeadAgeSeconds *float64 `json:"head_age_seconds,omitempty"`
	HeadStale      bool     `json:"head_stale,omitempty"`
}

// PinInfo is one recursive pin.
type PinInfo struct {
	CID  string `json:"cid"`
	Name string `json:"name,omitempty"`
}

// KnownPeer is one peer the node re-dials, as the API reports it.
type KnownPeer struct {
	ID            string    `json:"peer_id"`
	Addrs         []string  `json:"addrs"`
	Connected     bool      `json:"connected"`
	LastConnected time.Time `json:"last_connected"`
	// Failures is how many dials failed in a row; NextDial when the next one is (while not
	// connected), LastError why the last one failed.
	Failures  int       `json:"failures"`
	NextDial  time.Time `json:"next_dial"`
	LastError string    `json:"last_error,omitempty"`
}

// FetchReport says what a fetch found already held. KeptBlocks and KeptBytes are non-zero
// only when a streaming fetch resumed: the blocks an interrupted fetch had verified and
// stored (the root included), which were not asked for again. Total is the DAG's declared
// size.
type FetchReport struct {
	KeptBlocks int64 `json:"kept_blocks"`
	KeptBytes  int64 `json:"kept_bytes"`
	Total      int64 `json:"total"`
}

// Resumed reports whether the fetch kept more than the root, which is always kept
// (fetchRoot stores it before the streaming fetch starts).
func (r FetchReport) Resumed() bool { return r.KeptBlocks > 1 }

// GCReport says what GC removed (or, in a dry run, would remove).
type GCReport struct {
	DryRun        bool     `json:"dry_run"`
	Blocks        int      `json:"blocks"`
	BlockBytes    int64    `json:"block_bytes"`
	Segments      int      `json:"segments"`
	SegmentBytes  int64    `json:"segment_bytes"`
	UnpackFolders []string `json:"unpack_folders"`
	Workspaces    []string `json:"workspaces"`
}

// LedgerStatus is our head and every peer's, as `evalmesh ledger status --json` prints it.
type LedgerStatus struct {
	Network      string              `json:"network"`
	NetworkDoc   string              `json:"network_doc"`
	LedgerRoot   string              `json:"ledger_root"`
	Attestations int                 `json:"attestations"`
	Fingerprint  string              `json:"fingerprint"`
	Refused      int                 `json:"refused"`
	Campaigns    int                 `json:"campaigns"`
	Peers        []protocol.PeerHead `json:"peers"`
	// DocumentMajority is the network-document vote of the labs' certified nodes (set once
	// the mesh has run it): Mismatch means this node claims nothing until its document
	// matches the majority's.
	DocumentMajority *protocol.DocumentVerdict `json:"network_doc_majority,omitempty"`
	// ClaimingStopped: why this node stopped claiming after failures of its own runs
	// (node/mesh/health.go); empty while it claims.
	ClaimingStopped string `json:"claiming_stopped,omitempty"`
}

// MeshLedger is the last ledger the mesh computed from its store.
type MeshLedger struct {
	Ledger       *scoring.Ledger      `json:"ledger"`
	Report       *attest.LedgerReport `json:"report"`
	Root         string               `json:"ledger_root"`
	Attestations int                  `json:"attestations"`
	At           time.Time            `json:"at"`
}

// AgentRefusal is one agent of a campaign this node will not run, and why.
type AgentRefusal struct {
	Agent  string `json:"agent"` // the agent spec's CID
	Reason string `json:"reason"`
}

// PinStatusReport is `evalmesh pin status CID --json` (docs/cli-json.md).
type PinStatusReport struct {
	protocol.PinState
	// KeyLabs are, for a sealed bundle, the labs the stored grants give its key to.
	KeyLabs []string     `json:"key_labs,omitempty"`
	Labs    []LabHolding `json:"labs"`
}

// LabHolding is one lab's part in an object's pin status.
type LabHolding struct {
	Lab     string `json:"lab"`
	Name    string `json:"name"`
	Present bool   `json:"present"` // a node of the lab answered (or is this node)
	Holds   bool   `json:"holds"`
	// Counts: its holding counts toward the factor (for a sealed bundle, only a lab granted
	// its key counts; protocol.LedgerObject.Counting).
	Counts bool     `json:"counts"`
	Nodes  []string `json:"nodes"` // its nodes that hold the object
	// DiscountedUntil: a node of this lab failed this node's spot check of a block it
	// claimed (docs/design.md §9), so none of its claims counts here (Counts false) until
	// then; absent when it stands.
	DiscountedUntil *time.Time `json:"discounted_until,omitempty"`
}

// PinSurvey is one repair round: the pin state of every object the ledger rests on, as this
// node saw it, and what it fetched to restore the factor.
type PinSurvey struct {
	At          time.Time           `json:"at"`
	Factor      int                 `json:"factor"` // the network's; a sealed bundle's may be lower (States[i].Factor)
	Objects     int                 `json:"objects"`
	UnderFactor int                 `json:"under_factor"` // objects fewer present labs that count hold than their factor (before this round's fetches)
	Fetched     []string            `json:"fetched"`      // objects this node fetched and pinned in the round
	Failed      []string            `json:"failed"`       // "CID: error" for fetches that failed (retried next round)
	States      []protocol.PinState `json:"states"`
}

// IDInfo is the answer of /id.
type IDInfo struct {
	PeerID string   `json:"peer_id"`
	Addrs  []string `json:"addrs"`
}

// Event is one line of a streamed answer.
type Event struct {
	Phase string `json:"phase,omitempty"` // "pack", "fetch", "unpack"
	Bytes int64  `json:"bytes,omitempty"`
	Total int64  `json:"total,omitempty"`
	Done  bool   `json:"done,omitempty"`
	CID   string `json:"cid,omitempty"`
	Error string `json:"error,omitempty"`
	// GC is the report in the final event of repo/gc.
	GC *GCReport `json:"gc,omitempty"`
	// KeptBlocks and KeptBytes, in the final event of pin/add and task/get, are what a
	// resumed fetch found already held (FetchReport; omitted when it did not resume).
	KeptBlocks int64 `json:"kept_blocks,omitempty"`
	KeptBytes  int64 `json:"kept_bytes,omitempty"`
}

// CampaignInfo is one campaign this node knows.
type CampaignInfo struct {
	ID          string    `json:"id"`
	Title       string    `json:"title"`
	Lab         string    `json:"lab"`
	LabName     string    `json:"lab_name"`
	Network     string    `json:"network"`
	Tasks       int       `json:"tasks"`
	Agents      int       `json:"agents"`
	Seeds       int       `json:"seeds"`
	Replication int       `json:"replication"`
	Slots       int       `json:"slots"`
	Created     time.Time `json:"created"`
	Deadline    time.Time `json:"deadline"`
	// Ready is false while this node is still fetching the campaign's bundles.
	Ready bool `json:"ready"`
}

// CampaignReport is `campaign status`: the claim machine's counts and, per slot, who ran it
// and who re-scored it.
type CampaignReport struct {
	CampaignInfo
	Status protocol.CampaignStatus `json:"status"`
	Slots  []SlotReport            `json:"slot_reports"`
	// Refused lists the agents this node's policy will not run (their slots it never claims).
	Refused []AgentRefusal `json:"refused,omitempty"`
}

// SlotReport is one slot of a campaign report.
type SlotReport struct {
	ID    string `json:"id"`
	Task  string `json:"task"`
	Agent string `json:"agent"`
	Seed  int    `json:"seed"`
	// State is "done" (a run attestation is known), "running" (on this node), "refused" (this
	// node's policy will not run its agent: CampaignReport.Refused) or "open".
	State string      `json:"state"`
	Runs  []RunReport `json:"runs"`
}

// RunReport is one run attestation of a slot and its re-scores.
type RunReport struct {
	AttestationID string          `json:"attestation_id"`
	PeerID        string          `json:"peer_id"`
	Lab           string          `json:"lab"`
	Attempt       int             `json:"attempt"`
	Valid         bool            `json:"valid"`
	Score         *float64        `json:"score"`
	Rescores      []RescoreReport `json:"rescores"`
}

// RescoreReport is one re-score of a run.
type RescoreReport struct {
	AttestationID string   `json:"attestation_id"`
	PeerID        string   `json:"peer_id"`
	Lab           string   `json:"lab"`
	Valid         bool     `json:"valid"`
	Score         *float64 `json:"score"`
}

// ImportRefusal is one envelope (or file) an import refused, and why.
type ImportRefusal struct {
	File   string `json:"file"`
	ID     string `json:"id,omitempty"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// ImportReport is what `evalmesh attest import` prints.
type ImportReport struct {
	New      int             `json:"new"`
	Known    int             `json:"known"`
	Refused  int             `json:"refused"`
	Refusals []ImportRefusal `json:"refusals"`
}
