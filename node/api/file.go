package api

import (
	"io"
	"net/http"
	"strconv"
)

// fileRoutes adds file/cat: the bytes of a UnixFS file the node holds (an agent image
// tar that `evalmesh agent pull` loads into the local engine).
func fileRoutes(mux *http.ServeMux, n Node) {
	mux.HandleFunc("POST "+Prefix+"file/cat", func(w http.ResponseWriter, r *http.Request) {
		c, ok := parseCID(w, r.URL.Query().Get("cid"))
		if !ok {
			return
		}
		f, size, err := n.OpenFile(r.Context(), c)
		if err != nil {
			writeErr(w, http.StatusNotFound, err)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		_, _ = io.Copy(w, f) // a short body fails the client's Content-Length check
	})
}
