package api

import (
	"bufio"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/evalmesh/evalmesh/protocol/recon"
)

// The store's part of the HTTP API (registered by Handler):
//
//	POST /api/v0/attest/import  {paths}   → ImportReport
//	POST /api/v0/attest/export  {set}     → frames of envelopes (recon.FrameEnvelopes), then FrameDone
//	POST /api/v0/ledger/status            → LedgerStatus

// ImportRequest is the body of attest/import.
type ImportRequest struct {
	Paths []string `json:"paths"`
}

// ExportRequest is the body of attest/export; Set is SetAttestations (the default) or
// SetCampaigns.
type ExportRequest struct {
	Set string `json:"set"`
}

// The names of the verified store's sets (vstore.SetName), which attest/export serves.
const (
	SetAttestations = "attestations"
	SetCampaigns    = "campaigns"
)

func storeRoutes(mux *http.ServeMux, n Node) {
	mux.HandleFunc("POST "+Prefix+"attest/import", func(w http.ResponseWriter, r *http.Request) {
		var req ImportRequest
		if !readJSON(w, r, &req) {
			return
		}
		for _, p := range req.Paths {
			if !filepath.IsAbs(p) {
				writeErr(w, http.StatusBadRequest, fmt.Errorf("path %q is not absolute (the CLI resolves paths)", p))
				return
			}
		}
		rep, err := n.ImportPaths(req.Paths)
		if err != nil {
			writeErr(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, rep)
	})
	mux.HandleFunc("POST "+Prefix+"attest/export", func(w http.ResponseWriter, r *http.Request) {
		var req ExportRequest
		if !readJSON(w, r, &req) {
			return
		}
		if req.Set == "" {
			req.Set = SetAttestations
		}
		if req.Set != SetAttestations && req.Set != SetCampaigns {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("no set %q: use %s or %s", req.Set, SetAttestations, SetCampaigns))
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		bw := bufio.NewWriterSize(w, 1<<20)
		var batch [][]byte
		size := 0
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			_, err := bw.Write(recon.AppendFrame(nil, recon.FrameEnvelopes, recon.EncodeEnvelopes(batch)))
			batch, size = batch[:0], 0
			return err
		}
		_, err := n.EachEnvelope(req.Set, func(env []byte) error {
			batch, size = append(batch, env), size+len(env)
			if size >= 4<<20 {
				return flush()
			}
			return nil
		})
		if err == nil {
			err = flush()
		}
		if err == nil {
			bw.Write(recon.AppendFrame(nil, recon.FrameDone, nil))
		}
		bw.Flush()
	})
	mux.HandleFunc("POST "+Prefix+"ledger/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, n.LedgerStatus())
	})
}
