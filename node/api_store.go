package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/node/api"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// ImportPaths puts the envelope files at paths (files, or folders of *.json envelopes) into
// the attestation store, each verified once, and reports what became of them.
func (n *Node) ImportPaths(paths []string) (ImportReport, error) {
	rep := ImportReport{Refusals: []ImportRefusal{}}
	var files []attest.EnvelopeFile
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return rep, fmt.Errorf("import %s: %w", p, err)
		}
		if st.IsDir() {
			fs, refused, err := attest.ReadEnvelopeDir(p)
			if err != nil {
				return rep, err
			}
			files = append(files, fs...)
			for _, r := range refused {
				rep.Refusals = append(rep.Refusals, ImportRefusal{File: r.File, Reason: r.Reason, Detail: r.Detail})
			}
			continue
		}
		if st.Size() > attest.MaxEnvelopeSize {
			rep.Refusals = append(rep.Refusals, ImportRefusal{File: p, Reason: "too large", Detail: fmt.Sprintf("%d bytes, over %d", st.Size(), attest.MaxEnvelopeSize)})
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			rep.Refusals = append(rep.Refusals, ImportRefusal{File: p, Reason: "unreadable", Detail: err.Error()})
			continue
		}
		files = append(files, attest.EnvelopeFile{Name: p, Data: b})
	}
	const batch = 1000
	for lo := 0; lo < len(files); lo += batch {
		part := files[lo:min(len(files), lo+batch)]
		envs := make([][]byte, len(part))
		for i, f := range part {
			envs[i] = f.Data
		}
		res, err := n.vstore.Attestations().Add(envs, vstore.SourceImport, "")
		if err != nil {
			return rep, err
		}
		for i, r := range res {
			switch r.Status {
			case vstore.StatusNew:
				rep.New++
			case vstore.StatusKnown:
				rep.Known++
			case vstore.StatusRefused:
				rep.Refusals = append(rep.Refusals, ImportRefusal{File: part[i].Name, ID: r.ID, Reason: r.Reason, Detail: r.Detail})
			}
		}
	}
	rep.Refused = len(rep.Refusals)
	sort.Slice(rep.Refusals, func(i, j int) bool { return rep.Refusals[i].File < rep.Refusals[j].File })
	return rep, nil
}

// ImportAttestations asks the daemon to import envelope files or folders (absolute paths).
func (c *Client) ImportAttestations(ctx context.Context, paths []string) (ImportReport, error) {
	var rep ImportReport
	err := c.call(ctx, "attest/import", api.ImportRequest{Paths: paths}, &rep)
	return rep, err
}

// LedgerStatus asks the daemon for its head and its peers'.
func (c *Client) LedgerStatus(ctx context.Context) (LedgerStatus, error) {
	var st LedgerStatus
	err := c.call(ctx, "ledger/status", nil, &st)
	return st, err
}

// StoredEnvelopes returns every envelope in the daemon's set (attestations or campaigns):
// each was verified by the daemon when it arrived.
func (c *Client) StoredEnvelopes(ctx context.Context, set vstore.SetName) ([][]byte, error) {
	raw, err := json.Marshal(api.ExportRequest{Set: string(set)})
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, "attest/export", bytes.NewReader(raw), "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	var out [][]byte
	for {
		typ, body, err := recon.ReadFrame(br, 0)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("daemon's export ended early (was the daemon stopped?)")
			}
			return nil, err
		}
		if typ == recon.FrameDone {
			return out, nil
		}
		envs, err := recon.DecodeEnvelopes(body, attest.MaxEnvelopeSize)
		if err != nil {
			return nil, err
		}
		out = append(out, envs...)
	}
}
