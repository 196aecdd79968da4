package node

import (
	"context"
	"io"
	"net/url"

	"github.com/ipfs/go-cid"
)

// Cat streams the UnixFS file root, which the daemon must hold (Pin it first); size is its
// length.
func (c *Client) Cat(ctx context.Context, root cid.Cid) (r io.ReadCloser, size int64, err error) {
	resp, err := c.do(ctx, "file/cat?cid="+url.QueryEscape(root.String()), nil, "application/json")
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}
