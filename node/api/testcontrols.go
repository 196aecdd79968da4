package api

import (
	"fmt"
	"net/http"

	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// PartitionRequest (peer IDs) is the body and the answer of test/partition, and the answer
// of test/heal.
type PartitionRequest struct {
	Peers []string `json:"peers"`
}

// PaceRequest is the body and the answer of test/pace.
type PaceRequest struct {
	BytesPerSecond int64 `json:"bytes_per_second"`
}

// testRoutes adds the fault-test controls to mux (only with Options.TestControls).
func testRoutes(mux *http.ServeMux, n TestControls) {
	mux.HandleFunc("POST "+Prefix+"test/partition", func(w http.ResponseWriter, r *http.Request) {
		var req PartitionRequest
		if !readJSON(w, r, &req) {
			return
		}
		var ps []peer.ID
		for _, s := range req.Peers {
			p, err := peer.Decode(s)
			if err != nil {
				writeErr(w, http.StatusBadRequest, err)
				return
			}
			ps = append(ps, p)
		}
		n.Partition(ps)
		writeJSON(w, PartitionRequest{Peers: n.CutOff()})
	})
	mux.HandleFunc("POST "+Prefix+"test/pace", func(w http.ResponseWriter, r *http.Request) {
		var req PaceRequest
		if !readJSON(w, r, &req) {
			return
		}
		if req.BytesPerSecond < 0 {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("bytes_per_second %d: want 0 (no limit) or more", req.BytesPerSecond))
			return
		}
		lim := rate.Inf
		if req.BytesPerSecond > 0 {
			lim = rate.Limit(req.BytesPerSecond)
		}
		n.SetPace(lim)
		writeJSON(w, req)
	})
	mux.HandleFunc("POST "+Prefix+"test/heal", func(w http.ResponseWriter, r *http.Request) {
		n.Heal()
		writeJSON(w, PartitionRequest{Peers: n.CutOff()})
	})
}
