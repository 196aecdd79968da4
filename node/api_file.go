package node

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ipfs/go-cid"
)

// registerFileAPI adds file/cat: the bytes of a UnixFS file the node holds (an agent image
// tar that `evalmesh agent pull` loads into the local engine).
func (n *Node) registerFileAPI(mux *http.ServeMux) {
	mux.HandleFunc("POST "+apiPrefix+"file/cat", func(w http.ResponseWriter, r *http.Request) {
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

// Cat streams the UnixFS file root, which the daemon must hold (Pin it first); size is its
// length.
func (c *Client) Cat(ctx context.Context, root cid.Cid) (r io.ReadCloser, size int64, err error) {
	resp, err := c.do(ctx, "file/cat?cid="+url.QueryEscape(root.String()), nil, "application/json")
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}
