package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
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

// PublishRequest is the body of campaign/publish.
type PublishRequest struct {
	Envelope json.RawMessage `json:"envelope"`
}

// IDRequest is the body of campaign/status and rescore.
type IDRequest struct {
	ID string `json:"id"`
}

// IDResponse is the answer of campaign/publish, rescore and test/claim.
type IDResponse struct {
	ID string `json:"id"`
}

var errNoMesh = errors.New("this daemon is not in a network: list the network's labs in config `trust:` (a trust file) and give the node a lab certificate, then restart it")

// meshRoutes adds the network endpoints to mux.
func meshRoutes(mux *http.ServeMux, n Node, o Options) {
	handle := func(path string, f func(w http.ResponseWriter, r *http.Request, m Mesh)) {
		mux.HandleFunc("POST "+Prefix+path, func(w http.ResponseWriter, r *http.Request) {
			m := n.Mesh()
			if m == nil {
				writeErr(w, http.StatusServiceUnavailable, errNoMesh)
				return
			}
			f(w, r, m)
		})
	}
	handle("campaign/publish", func(w http.ResponseWriter, r *http.Request, m Mesh) {
		var req PublishRequest
		if !readJSON(w, r, &req) {
			return
		}
		id, err := m.PublishCampaign(req.Envelope)
		if err != nil {
			writeErr(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, IDResponse{ID: id})
	})
	handle("campaign/ls", func(w http.ResponseWriter, r *http.Request, m Mesh) {
		ls, err := m.Campaigns(r.Context())
		if err != nil {
			writeErr(w, http.StatusServiceUnavailable, err)
			return
		}
		writeJSON(w, OrEmpty(ls))
	})
	handle("campaign/status", func(w http.ResponseWriter, r *http.Request, m Mesh) {
		var req IDRequest
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
	handle("rescore", func(w http.ResponseWriter, r *http.Request, m Mesh) {
		var req IDRequest
		if !readJSON(w, r, &req) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Minute) // wall clock: bounds an HTTP request its client waits on
		defer cancel()
		id, err := m.Rescore(ctx, req.ID)
		if err != nil {
			writeErr(w, http.StatusBadGateway, err)
			return
		}
		writeJSON(w, IDResponse{ID: id})
	})
	handle("mesh/ledger", func(w http.ResponseWriter, r *http.Request, m Mesh) {
		l := m.Ledger()
		if l == nil {
			writeErr(w, http.StatusServiceUnavailable, errors.New("no ledger yet: this node knows no campaign whose bundles it holds"))
			return
		}
		writeJSON(w, l)
	})
	if o.TestControls != nil {
		// A test-only hook: publish a claim message of the test's making, signed (as any
		// claim) by this node, so that a fault test can play a dishonest lab's node.
		handle("test/claim", func(w http.ResponseWriter, r *http.Request, m Mesh) {
			var msg protocol.ClaimMessage
			if !readJSON(w, r, &msg) {
				return
			}
			if err := m.PublishClaim(r.Context(), msg); err != nil {
				writeErr(w, http.StatusServiceUnavailable, err)
				return
			}
			writeJSON(w, IDResponse{ID: msg.Slot})
		})
	}
}
