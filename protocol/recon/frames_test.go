package recon

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
)

func TestFramesRoundTrip(t *testing.T) {
	ids := []ID{item(1).ID, item(2).ID}
	envs := [][]byte{[]byte("one"), {}, bytes.Repeat([]byte("x"), 300)}
	var stream []byte
	stream = AppendFrame(stream, FrameFetch, EncodeIDs(ids))
	stream = AppendFrame(stream, FrameEnvelopes, EncodeEnvelopes(envs))
	stream = AppendFrame(stream, FrameDone, nil)
	r := bufio.NewReader(bytes.NewReader(stream))
	typ, body, err := ReadFrame(r, 0)
	if got, err2 := DecodeIDs(body); err != nil || err2 != nil || typ != FrameFetch || !slices.Equal(got, ids) {
		t.Fatalf("fetch frame: %v %v %x", err, err2, typ)
	}
	typ, body, err = ReadFrame(r, 0)
	got, err2 := DecodeEnvelopes(body, 1000)
	if err != nil || err2 != nil || typ != FrameEnvelopes || len(got) != 3 || !bytes.Equal(got[2], envs[2]) {
		t.Fatalf("envelopes frame: %v %v", err, err2)
	}
	if typ, _, err = ReadFrame(r, 0); typ != FrameDone || err != nil {
		t.Fatalf("done frame: %x %v", typ, err)
	}
	if _, _, err = ReadFrame(r, 0); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}

func TestFramesRefuseOversize(t *testing.T) {
	big := AppendFrame(nil, FrameRecon, make([]byte, 100))
	if _, _, err := ReadFrame(bufio.NewReader(bytes.NewReader(big)), 50); !errors.Is(err, ErrFrame) {
		t.Fatalf("frame over the limit: %v", err)
	}
	if _, err := DecodeEnvelopes(EncodeEnvelopes([][]byte{make([]byte, 20)}), 10); !errors.Is(err, ErrFrame) {
		t.Fatalf("envelope over the limit: %v", err)
	}
	if _, err := DecodeIDs(EncodeIDs(make([]ID, MaxFetchIDs+1))); !errors.Is(err, ErrFrame) {
		t.Fatalf("fetch over the limit: %v", err)
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(AppendFrame(nil, FrameHello, []byte("attestations")))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, body, err := ReadFrame(bufio.NewReader(bytes.NewReader(b)), 1<<16)
		if err == nil && !bytes.Equal(AppendFrame(nil, typ, body), b[:len(AppendFrame(nil, typ, body))]) {
			t.Fatal("frame does not re-encode to its bytes")
		}
	})
}

func FuzzDecodeIDs(f *testing.F) {
	f.Add(EncodeIDs([]ID{item(1).ID}))
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := DecodeIDs(b)
		if err == nil && !bytes.Equal(EncodeIDs(ids), b) {
			t.Fatal("IDs do not re-encode to their bytes")
		}
	})
}

func FuzzDecodeEnvelopes(f *testing.F) {
	f.Add(EncodeEnvelopes([][]byte{[]byte("a"), []byte("bc")}))
	f.Add([]byte{0x02, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		envs, err := DecodeEnvelopes(b, 1<<10)
		if err == nil && !bytes.Equal(EncodeEnvelopes(envs), b) {
			t.Fatal("envelopes do not re-encode to their bytes")
		}
	})
}
