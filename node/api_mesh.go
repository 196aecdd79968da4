package node

import (
	"context"

	"github.com/evalmesh/evalmesh/node/api"
	"github.com/evalmesh/evalmesh/node/mesh"
	"github.com/evalmesh/evalmesh/protocol"
)

// Mesh returns the node's network part, or nil when it runs alone.
func (n *Node) Mesh() *mesh.Mesh {
	n.meshMu.Lock()
	defer n.meshMu.Unlock()
	return n.mesh
}

func (n *Node) setMesh(m *mesh.Mesh) {
	n.meshMu.Lock()
	n.mesh = m
	n.meshMu.Unlock()
}

// TestClaim asks a daemon started with --test-controls to publish msg as its own claim
// message (peer ID, lab and certificate filled in by the daemon).
func (c *Client) TestClaim(ctx context.Context, msg protocol.ClaimMessage) error {
	return c.call(ctx, "test/claim", msg, nil)
}

// PublishCampaign asks the daemon to verify, store and gossip a campaign envelope.
func (c *Client) PublishCampaign(ctx context.Context, envelope []byte) (string, error) {
	var out api.IDResponse
	err := c.call(ctx, "campaign/publish", api.PublishRequest{Envelope: envelope}, &out)
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
	if err := c.call(ctx, "campaign/status", api.IDRequest{ID: id}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Rescore asks the daemon to re-score a run attestation; it returns the re-score's ID.
func (c *Client) Rescore(ctx context.Context, runID string) (string, error) {
	var out api.IDResponse
	err := c.call(ctx, "rescore", api.IDRequest{ID: runID}, &out)
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
