package xfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// FetchBlock asks peer p alone for the one block c (ModeBlock) and returns its bytes,
// verified against c, storing nothing. Why a call of its own: a spot check of a lab's
// holdings (node/pins/spotcheck.go) must learn whether that node can send a block, which a
// Fetch, falling back on other peers and skipping what the blockstore has, does not say.
func FetchBlock(ctx context.Context, h host.Host, p peer.ID, c cid.Cid) ([]byte, error) {
	if isIdentity(c) {
		return identityData(c)
	}
	s, err := h.NewStream(ctx, p, ProtocolID)
	if err != nil {
		return nil, fmt.Errorf("opening stream to %s: %w", p, err)
	}
	stop := context.AfterFunc(ctx, func() { s.Reset() })
	defer stop()
	defer s.Close()
	if _, err := s.Write(AppendRequest(nil, []Item{{Mode: ModeBlock, Cid: c}})); err != nil {
		s.Reset()
		return nil, fmt.Errorf("asking %s for block %s: %w", p, c, err)
	}
	_ = s.CloseWrite()
	data, err := readFrame(bufio.NewReaderSize(s, 64<<10))
	if errors.Is(err, errEnd) {
		err = errors.New("response ended without it")
	}
	if err != nil {
		s.Reset()
		return nil, fmt.Errorf("block %s from %s: %w", c, p, err)
	}
	if err := Verify(c, data); err != nil {
		s.Reset()
		return nil, fmt.Errorf("%s sent a block that does not match its CID %s", p, c)
	}
	return data, nil
}
