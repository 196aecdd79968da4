package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/evalmesh/evalmesh/protocol"
)

// The network part of the HTTP API (answered only while the daemon is in a network):
//
//	POST /api/v0/campaign/publish {envelope}  → {id}
//	POST /api/v0/campaign/ls                  → []CampaignInfo
//	POST /api/v0/campaign/status  {id}        → CampaignReport
//	POST /api/v0/rescore          {id}        → {id}  (the re-score's attestation ID)
//	POST /api/v0/mesh/ledger                  → MeshLedger

type publishReq struct {
	Envelope json.RawMessage `json:"envelope"`
}

type idReq struct {
	ID string `json:"id"`
}

type idResp struct {
	ID string `json:"id"`
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

var errNoMesh = errors.New("this daemon is not in a network: list the network's labs in config `trust:` (a trust file) and give the node a lab certificate, then restart it")

// Mesh returns the node's network part, or nil when it runs alone.
func (n *Node) Mesh() *Mesh {
	n.meshMu.Lock()
	defer n.meshMu.Unlock()
	return n.mesh
}

func (n *Node) setMesh(m *Mesh) {
	n.meshMu.Lock()
	n.mesh = m
	n.meshMu.Unlock()
}

// meshRoutes adds the network endpoints to mux.
func (n *Node) meshRoutes(mux *http.ServeMux) {
	handle := func(path string, f func(w http.ResponseWriter, r *http.Request, m *Mesh)) {
		mux.HandleFunc("POST "+apiPrefix+path, func(w http.ResponseWriter, r *http.Request) {
			m := n.Mesh()
			if m == nil {
				writeErr(w, http.StatusServiceUnavailable, errNoMesh)
				return
			}
			f(w, r, m)
		})
	}
	handle("campaign/publish", func(w http.ResponseWriter, r *http.Request, m *Mesh) {
		var req publishReq
		if !readJSON(w, r, &req) {
			return
		}
		id, err := m.PublishCampaign(req.Envelope)
		if err != nil {
			writeErr(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, idResp{ID: id})
	})
	handle("campaign/ls", func(w http.ResponseWriter, r *http.Request, m *Mesh) {
		ls, err := m.Campaigns(r.Context())
		if err != nil {
			writeErr(w, http.StatusServiceUnavailable, err)
			return
		}
		writeJSON(w, orEmpty(ls))
	})
	handle("campaign/status", func(w http.ResponseWriter, r *http.Request, m *Mesh) {
		var req idReq
		if !readJSON(w, r, &req) {
			return
		}
		rep, err := m.CampaignStatus(r.Context(), req.ID)
		if err != nil {
			writeErr(w, http.StatusNotFound, err)
			return
		}
		writeJSON(w, rep)
	})
	handle("rescore", func(w http.ResponseWriter, r *http.Request, m *Mesh) {
		var req idReq
		if !readJSON(w, r, &req) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Minute)
		defer cancel()
		id, err := m.Rescore(ctx, req.ID)
		if err != nil {
			writeErr(w, http.StatusBadGateway, err)
			return
		}
		writeJSON(w, idResp{ID: id})
	})
	handle("mesh/ledger", func(w http.ResponseWriter, r *http.Request, m *Mesh) {
		l := m.Ledger()
		if l == nil {
			writeErr(w, http.StatusServiceUnavailable, errors.New("no ledger yet: this node knows no campaign whose bundles it holds"))
			return
		}
		writeJSON(w, l)
	})
	if n.opts.TestControls {
		// A test-only hook: publish a claim message of the test's making, signed (as any
		// claim) by this node, so that a fault test can play a dishonest lab's node.
		handle("test/claim", func(w http.ResponseWriter, r *http.Request, m *Mesh) {
			var msg protocol.ClaimMessage
			if !readJSON(w, r, &msg) {
				return
			}
			if err := m.publishRaw(r.Context(), msg); err != nil {
				writeErr(w, http.StatusServiceUnavailable, err)
				return
			}
			writeJSON(w, idResp{ID: msg.Slot})
		})
	}
}

// publishRaw publishes msg on the claims topic as this node's (its peer ID, lab and
// certificate filled in), bypassing the claim machine: only for the test hook above.
func (m *Mesh) publishRaw(ctx context.Context, msg protocol.ClaimMessage) error {
	var cfg protocol.ClaimConfig
	if err := m.query(ctx, func() { cfg = m.coord.ClaimConfig() }); err != nil {
		return err
	}
	msg.V, msg.PeerID, msg.Lab, msg.Cert = protocol.Version, cfg.Self, cfg.Lab, cfg.Cert
	select {
	case m.publish <- msg:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestClaim asks a daemon started with --test-controls to publish msg as its own claim
// message (peer ID, lab and certificate filled in by the daemon).
func (c *Client) TestClaim(ctx context.Context, msg protocol.ClaimMessage) error {
	return c.call(ctx, "test/claim", msg, nil)
}

func (mc *meshCampaign) info(ready bool) CampaignInfo {
	c := mc.v.Campaign
	return CampaignInfo{ID: mc.v.ID, Title: c.Title, Lab: mc.v.Lab, LabName: mc.v.LabName, Network: c.Network,
		Tasks: len(c.Tasks), Agents: len(c.Agents), Seeds: c.Seeds, Replication: c.Replication,
		Slots: len(c.Tasks) * len(c.Agents) * c.Seeds, Created: c.Created, Deadline: c.Deadline, Ready: ready}
}

// Campaigns lists the campaigns this node has prepared, newest first.
func (m *Mesh) Campaigns(ctx context.Context) ([]CampaignInfo, error) {
	var out []CampaignInfo
	err := m.query(ctx, func() {
		for _, mc := range m.campaigns {
			out = append(out, mc.info(m.coord.Ready(mc.v.ID)))
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.After(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, err
}

// CampaignStatus reports a campaign's slots as this node sees them.
func (m *Mesh) CampaignStatus(ctx context.Context, id string) (*CampaignReport, error) {
	var rep *CampaignReport
	err := m.query(ctx, func() {
		mc, ok := m.campaigns[id]
		if !ok {
			return
		}
		st, _ := m.coord.Status(id, m.opts.Now())
		rep = &CampaignReport{CampaignInfo: mc.info(m.coord.Ready(id)), Status: st, Slots: []SlotReport{}, Refused: mc.refusals()}
		for _, s := range mc.v.Campaign.Slots() {
			sid := protocol.SlotID(s)
			sr := SlotReport{ID: sid, Task: s.Task, Agent: s.Agent, Seed: s.Seed, State: "open", Runs: []RunReport{}}
			if _, no := mc.refused[s.Agent]; no {
				sr.State = "refused" // by this node's policy (Refused says why)
			} else if m.coord.NoKey(id, s.Task) {
				sr.State = "no-key" // sealed, and this lab cannot open its key: key holders first
			}
			if m.coord.AwaitingKey(sid) > 0 {
				sr.State = "awaiting-key" // this node's run waits for the sealed bundle's key
			}
			if _, ok := m.running[sid]; ok {
				sr.State = "running"
			}
			for _, rid := range m.bySlot[sid] {
				r := m.runs[rid]
				sr.State = "done"
				rr := RunReport{AttestationID: r.ID, PeerID: r.Node, Lab: r.Lab, Attempt: r.Attempt, Valid: r.Valid, Score: r.Score, Rescores: []RescoreReport{}}
				for _, rs := range m.rescores[rid] {
					rr.Rescores = append(rr.Rescores, RescoreReport{AttestationID: rs.ID, PeerID: rs.Node, Lab: rs.Lab, Valid: rs.Valid, Score: rs.Score})
				}
				sr.Runs = append(sr.Runs, rr)
			}
			rep.Slots = append(rep.Slots, sr)
		}
	})
	if err != nil {
		return nil, err
	}
	if rep == nil {
		return nil, fmt.Errorf("campaign %s is not known to this node (see `evalmesh campaign ls`; a campaign is listed once its bundles are fetched)", id)
	}
	return rep, nil
}

// PublishCampaign asks the daemon to verify, store and gossip a campaign envelope.
func (c *Client) PublishCampaign(ctx context.Context, envelope []byte) (string, error) {
	var out idResp
	err := c.call(ctx, "campaign/publish", publishReq{Envelope: envelope}, &out)
	return out.ID, err
}

// Campaigns lists the daemon's campaigns.
func (c *Client) Campaigns(ctx context.Context) ([]CampaignInfo, error) {
	var out []CampaignInfo
	err := c.call(ctx, "campaign/ls", nil, &out)
	return out, err
}

// CampaignStatus reports one campaign.
func (c *Client) CampaignStatus(ctx context.Context, id string) (*CampaignReport, error) {
	var out CampaignReport
	if err := c.call(ctx, "campaign/status", idReq{ID: id}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Rescore asks the daemon to re-score a run attestation; it returns the re-score's ID.
func (c *Client) Rescore(ctx context.Context, runID string) (string, error) {
	var out idResp
	err := c.call(ctx, "rescore", idReq{ID: runID}, &out)
	return out.ID, err
}

// MeshLedger returns the daemon's last computed ledger.
func (c *Client) MeshLedger(ctx context.Context) (*MeshLedger, error) {
	var out MeshLedger
	if err := c.call(ctx, "mesh/ledger", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
