package api

import (
	"fmt"
	"net/http"
)

// PinStatusRequest is the body of pin/status.
type PinStatusRequest struct {
	CID string `json:"cid"`
}

// pinRoutes adds pin/status to the API.
func pinRoutes(mux *http.ServeMux, n Node, o Options) {
	mux.HandleFunc("POST "+Prefix+"pin/status", func(w http.ResponseWriter, r *http.Request) {
		var req PinStatusRequest
		c, ok := readCIDBody(w, r, &req)
		if !ok {
			return
		}
		rep, err := n.PinStatus(r.Context(), c)
		if err != nil {
			writeErr(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, rep)
	})
	mux.HandleFunc("POST "+Prefix+"pin/ledger", func(w http.ResponseWriter, r *http.Request) {
		sv := n.LastPinSurvey()
		if sv == nil {
			writeErr(w, http.StatusServiceUnavailable, fmt.Errorf("no repair round has run yet: a daemon in a network runs one every %s", o.PinRepairInterval))
			return
		}
		writeJSON(w, sv)
	})
}
