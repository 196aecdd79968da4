package pins

import (
	"bytes"
	"testing"
)

// The holdings stream's two decoders read what a peer sends: neither may panic, and what
// they accept keeps their bounds.
func FuzzHoldingsRequest(f *testing.F) {
	f.Add([]byte(`{"cids":["bafkreidtw72sz4tixpoarb4xgbuzzbbnvkj42xwbkpxrkrxaljcwufpite"]}`))
	f.Add([]byte(`{"cids":null}`))
	f.Add([]byte(`[1,2`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeHoldingsRequest(bytes.NewReader(data))
		if err == nil && len(req.CIDs) > maxHoldingsCIDs {
			t.Fatalf("accepted %d CIDs", len(req.CIDs))
		}
	})
}

func FuzzHoldingsResponse(f *testing.F) {
	f.Add([]byte(`{"holds":[true,false]}`), 2)
	f.Add([]byte(`{"cert":{"a":1},"holds":[true]}`), 1)
	f.Add([]byte(`{"holds":[true]}`), 3)
	f.Fuzz(func(t *testing.T, data []byte, want int) {
		resp, err := decodeHoldingsResponse(bytes.NewReader(data), want)
		if err == nil && len(resp.Holds) != want {
			t.Fatalf("accepted %d answers for %d", len(resp.Holds), want)
		}
	})
}
