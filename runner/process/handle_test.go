package process

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/evalmesh/evalmesh/runner"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  procStat
		valid bool
	}{
		{"1234 (sh) S 1 1234 1234 0 -1 4194560 99 0 0 0 0 0 0 0 20 0 1 0 987654 2244608 200 18446744073709551615", procStat{'S', 987654, 1234}, true},
		// A command name with spaces and parentheses must not shift the fields.
		{"77 (a) b) (c) Z 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 0 0 0", procStat{'Z', 42, 77}, true},
		{"77 (x) S 1 2", procStat{}, false},
		{"no paren", procStat{}, false},
		{"1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 notanumber 0", procStat{}, false},
	} {
		got, err := parseStat([]byte(tc.in))
		if (err == nil) != tc.valid || got != tc.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v valid=%v", tc.in, got, err, tc.want, tc.valid)
		}
	}
	// And the real thing.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", os.Getpid()))
	if err != nil {
		t.Skip("no /proc here")
	}
	if st, err := parseStat(b); err != nil || st.State != 'R' && st.State != 'S' || st.StartTicks == 0 {
		t.Errorf("own stat = %+v, %v", st, err)
	}
}

func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *runner.ExitResult
		ok   bool
		err  bool
	}{
		{"0\n", &runner.ExitResult{}, true, false},
		{"3\n", &runner.ExitResult{ExitCode: 3}, true, false},
		{"137\n", &runner.ExitResult{ExitCode: 137, Signal: 9}, true, false},
		{"", nil, false, false},
		{"x", nil, false, true},
		{"-1", nil, false, true},
		{`{"exit_code":143,"signal":15,"timed_out":true,"finished":"2026-01-01T00:00:00Z"}`, nil, true, false},
	} {
		got, ok, err := parseStatus([]byte(tc.in))
		if ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("parseStatus(%q) = %+v, %v, %v", tc.in, got, ok, err)
			continue
		}
		if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseStatus(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add("1234 (sh) S 1 1234 1234 0 -1 4194560 99 0 0 0 0 0 0 0 20 0 1 0 987654 2244608")
	f.Add("77 (a) b) (c) Z 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 0 0 0")
	f.Add(")")
	f.Fuzz(func(t *testing.T, in string) {
		_, _ = parseStat([]byte(in))
	})
}

func FuzzParseStatus(f *testing.F) {
	f.Add("0\n")
	f.Add("255")
	f.Add(`{"exit_code":1}`)
	f.Add("{")
	f.Fuzz(func(t *testing.T, in string) {
		res, ok, err := parseStatus([]byte(in))
		if ok && res == nil || err != nil && ok {
			t.Fatalf("inconsistent: %+v %v %v", res, ok, err)
		}
	})
}

func FuzzDecodeState(f *testing.F) {
	f.Add(`{"pid":123,"start_ticks":5,"status_path":"/x/y.exit","cgroups":["/sys/fs/cgroup/pids/evalmesh/y"]}`)
	f.Add(`{"pid":1,"status_path":"x"}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, raw string) {
		h := &runner.Handle{Driver: DriverName, DriverState: json.RawMessage(raw)}
		s, err := decodeState(h)
		if err == nil && (s.PID <= 1 || s.StatusPath == "") {
			t.Fatalf("accepted %+v", s)
		}
	})
}
