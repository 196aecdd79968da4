package slurm

import (
	"encoding/json"
	"testing"

	"github.com/evalmesh/evalmesh/runner"
)

func TestDecodeState(t *testing.T) {
	ok := &runner.Handle{Driver: DriverName, DriverState: encodeState(state{JobID: "42", JobDir: "/runs/r/logs/slurm-a"})}
	if s, err := decodeState(ok); err != nil || s.JobID != "42" {
		t.Fatalf("decodeState = %+v, %v", s, err)
	}
	for name, h := range map[string]*runner.Handle{
		"nil":          nil,
		"other driver": {Driver: "docker", DriverState: ok.DriverState},
		"no job":       {Driver: DriverName, DriverState: json.RawMessage(`{"job_dir":"/x"}`)},
		"bad job id":   {Driver: DriverName, DriverState: json.RawMessage(`{"job_id":"1; rm -rf /","job_dir":"/x"}`)},
		"relative dir": {Driver: DriverName, DriverState: json.RawMessage(`{"job_id":"1","job_dir":"x"}`)},
		"not json":     {Driver: DriverName, DriverState: json.RawMessage(`{`)},
	} {
		if _, err := decodeState(h); err == nil {
			t.Errorf("%s: decodeState accepted it", name)
		}
	}
}

func FuzzDecodeState(f *testing.F) {
	for _, s := range []string{`{"job_id":"42","job_dir":"/a"}`, `{"job_id":"","job_dir":""}`, `{"job_id":"12345678901234567890123"}`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := decodeState(&runner.Handle{Driver: DriverName, DriverState: json.RawMessage(s)})
		if err == nil && (!validJobID(st.JobID) || st.JobDir == "" || st.JobDir[0] != '/') {
			t.Fatalf("accepted %+v", st)
		}
	})
}
