package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// PIDsLimitHits reads the "max" counter of dir/pids.events (cgroup v1 and v2): how many
// times the task's pids limit refused a fork or clone. 0 when the file is absent or
// unreadable; the executors read it while their task's cgroup exists.
func PIDsLimitHits(dir string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, "pids.events"))
	if err != nil {
		return 0
	}
	return ParsePIDsEvents(b)
}

// ParsePIDsEvents parses the contents of a pids.events file ("max N" lines). Anything else
// counts as 0: the file is a kernel's, but a decoder never trusts its input.
func ParsePIDsEvents(b []byte) int64 {
	var n int64
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) != 2 || string(f[0]) != "max" {
			continue
		}
		if v, err := strconv.ParseInt(string(f[1]), 10, 64); err == nil && v > n {
			n = v
		}
	}
	return n
}
