package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// The store's part of the HTTP API (registered by Handler):
//
//	POST /api/v0/attest/import  {paths}   → ImportReport
//	POST /api/v0/attest/export  {set}     → frames of envelopes (recon.FrameEnvelopes), then FrameDone
//	POST /api/v0/ledger/status            → LedgerStatus

type importReq struct {
	Paths []string `json:"paths"`
}

type exportReq struct {
	Set SetName `json:"set"`
}

// ImportRefusal is one envelope (or file) an import refused, and why.
type ImportRefusal struct {
	File   string `json:"file"`
	ID     string `json:"id,omitempty"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// ImportReport is what `evalmesh attest import` prints.
type ImportReport struct {
	New      int             `json:"new"`
	Known    int             `json:"known"`
	Refused  int             `json:"refused"`
	Refusals []ImportRefusal `json:"refusals"`
}

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
		res, err := n.vstore.Attestations().Add(envs, SourceImport, "")
		if err != nil {
			return rep, err
		}
		for i, r := range res {
			switch r.Status {
			case StatusNew:
				rep.New++
			case StatusKnown:
				rep.Known++
			case StatusRefused:
				rep.Refusals = append(rep.Refusals, ImportRefusal{File: part[i].Name, ID: r.ID, Reason: r.Reason, Detail: r.Detail})
			}
		}
	}
	rep.Refused = len(rep.Refusals)
	sort.Slice(rep.Refusals, func(i, j int) bool { return rep.Refusals[i].File < rep.Refusals[j].File })
	return rep, nil
}

func (n *Node) registerStoreAPI(mux *http.ServeMux) {
	mux.HandleFunc("POST "+apiPrefix+"attest/import", func(w http.ResponseWriter, r *http.Request) {
		var req importReq
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
	mux.HandleFunc("POST "+apiPrefix+"attest/export", func(w http.ResponseWriter, r *http.Request) {
		var req exportReq
		if !readJSON(w, r, &req) {
			return
		}
		if req.Set == "" {
			req.Set = SetAttestations
		}
		set := n.vstore.Set(req.Set)
		if set == nil {
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
		err := set.Each(func(_ recon.ID, env []byte) error {
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
	mux.HandleFunc("POST "+apiPrefix+"ledger/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, n.LedgerStatus())
	})
}

// ImportAttestations asks the daemon to import envelope files or folders (absolute paths).
func (c *Client) ImportAttestations(ctx context.Context, paths []string) (ImportReport, error) {
	var rep ImportReport
	err := c.call(ctx, "attest/import", importReq{Paths: paths}, &rep)
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
func (c *Client) StoredEnvelopes(ctx context.Context, set SetName) ([][]byte, error) {
	raw, err := json.Marshal(exportReq{Set: set})
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
