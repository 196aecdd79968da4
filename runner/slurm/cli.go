package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// cli runs Slurm's commands (why commands and not slurmrestd: the package doc).
type cli struct {
	env []string // extra environment (SLURM_CONF)
}

// run runs a Slurm command and returns its stdout; an error carries its stderr.
func (c cli) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), c.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.Bytes(), &cmdError{cmd: name, stderr: strings.TrimSpace(stderr.String()), err: err}
		}
		return nil, fmt.Errorf("slurm executor: %s: %w (is Slurm's client installed and on PATH?)", name, err)
	}
	return stdout.Bytes(), nil
}

type cmdError struct {
	cmd, stderr string
	err         error
}

func (e *cmdError) Error() string {
	return fmt.Sprintf("slurm executor: %s: %v: %s", e.cmd, e.err, e.stderr)
}
func (e *cmdError) Unwrap() error { return e.err }

// job is what Slurm says about one job, from `scontrol show job -o` while the controller
// remembers it (MinJobAge) or from sacct after that, where accounting is configured.
type job struct {
	ID        string
	State     string // PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, OUT_OF_MEMORY, NODE_FAIL, …
	Reason    string
	ExitCode  int // the batch script's status
	Signal    int
	Node      string
	Partition string
	Start     time.Time
	End       time.Time
	Elapsed   time.Duration
	GPUs      int     // allocated gres/gpu
	EnergyJ   float64 // ConsumedEnergy where Slurm's energy accounting runs
}

// States in which the job holds or waits for resources; every other state is final.
func (j *job) active() bool {
	switch j.State {
	case "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
		"REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD":
		return true
	}
	return false
}

// parseFields splits one `scontrol show … -o` line into its Key=Value fields. Values hold no
// spaces except Command= and the like at the end of a record, so a field that does not look
// like Key=Value continues the previous value.
func parseFields(line string) map[string]string {
	out := map[string]string{}
	last := ""
	for _, w := range strings.Fields(line) {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			if last != "" {
				out[last] += " " + w
			}
			continue
		}
		out[k], last = v, k
	}
	return out
}

// parseJob reads `scontrol show job -o ID` output.
func parseJob(out []byte) (*job, error) {
	line := strings.TrimSpace(string(out))
	if line == "" {
		return nil, errors.New("empty scontrol output")
	}
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i] // an array or het job: its first record
	}
	f := parseFields(line)
	if f["JobId"] == "" || f["JobState"] == "" {
		return nil, fmt.Errorf("scontrol output without JobId and JobState: %.200q", line)
	}
	j := &job{ID: f["JobId"], State: f["JobState"], Reason: f["Reason"], Partition: f["Partition"]}
	if n := f["NodeList"]; n != "(null)" {
		j.Node = n
	}
	j.ExitCode, j.Signal = parseExitCode(f["ExitCode"])
	j.Start, j.End = parseTime(f["StartTime"]), parseTime(f["EndTime"])
	j.Elapsed = parseDuration(f["RunTime"])
	j.GPUs = tresCount(f["TRES"], "gres/gpu")
	if j.GPUs == 0 {
		// Without slurmdbd the TRES lists no GRES; what the job asked for stands in.
		for _, k := range []string{"TresPerJob", "TresPerNode"} {
			if _, n := gresGPUs(strings.TrimPrefix(f[k], "gres:")); n > 0 {
				j.GPUs = n
				break
			}
		}
	}
	if e, err := strconv.ParseFloat(f["ConsumedEnergy"], 64); err == nil {
		j.EnergyJ = e
	}
	return j, nil
}

// parseSacct reads one `sacct -X -n -P -o JobIDRaw,State,ExitCode,NodeList,Partition,Start,End,ElapsedRaw,AllocTRES,ConsumedEnergyRaw` line.
func parseSacct(out []byte) (*job, error) {
	line := strings.TrimSpace(string(out))
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	p := strings.Split(line, "|")
	if len(p) < 10 || p[0] == "" {
		return nil, fmt.Errorf("unexpected sacct output %.200q", line)
	}
	state, _, _ := strings.Cut(p[1], " ") // "CANCELLED by 0"
	j := &job{ID: p[0], State: state, Node: p[3], Partition: p[4], Start: parseTime(p[5]), End: parseTime(p[6]), GPUs: tresCount(p[8], "gres/gpu")}
	if j.Node == "None assigned" {
		j.Node = ""
	}
	j.ExitCode, j.Signal = parseExitCode(p[2])
	if s, err := strconv.ParseInt(p[7], 10, 64); err == nil && s >= 0 {
		j.Elapsed = time.Duration(s) * time.Second
	}
	if e, err := strconv.ParseFloat(p[9], 64); err == nil {
		j.EnergyJ = e
	}
	return j, nil
}

// parseExitCode reads Slurm's "status:signal".
func parseExitCode(s string) (code, sig int) {
	a, b, _ := strings.Cut(s, ":")
	code, _ = strconv.Atoi(a)
	sig, _ = strconv.Atoi(b)
	return code, sig
}

// parseTime reads Slurm's local-time timestamps ("2026-12-01T23:28:25"); "Unknown", "None"
// and the like give the zero time.
func parseTime(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		return time.Time{}
	}
	return t
}

// parseDuration reads Slurm's "[D-]HH:MM:SS" (or "MM:SS").
func parseDuration(s string) time.Duration {
	days := 0
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0
		}
		days, s = n, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0
	}
	total := 0
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 1<<20 {
			return 0
		}
		total = total*60 + n
	}
	return time.Duration(days)*24*time.Hour + time.Duration(total)*time.Second
}

// tresCount reads one count out of a TRES list ("cpu=1,mem=1G,gres/gpu=2" or
// "gres/gpu:h200=2"); untyped entries win over typed ones.
func tresCount(tres, name string) int {
	n, typed := 0, 0
	for _, kv := range strings.Split(tres, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		c, err := strconv.Atoi(v)
		if err != nil || c < 0 {
			continue
		}
		if k == name {
			n = c
		} else if strings.HasPrefix(k, name+":") {
			typed += c
		}
	}
	if n == 0 {
		n = typed
	}
	return n
}

// showJob asks the controller about a job; (nil, nil) when it no longer knows the job.
func (c cli) showJob(ctx context.Context, id string) (*job, error) {
	out, err := c.run(ctx, "scontrol", "show", "job", "-o", id)
	if err != nil {
		var ce *cmdError
		if errors.As(err, &ce) && strings.Contains(ce.stderr, "Invalid job id") {
			return nil, nil
		}
		return nil, err
	}
	return parseJob(out)
}

// sacct asks Slurm's accounting about a job; (nil, nil) when accounting is off or has no
// record of it.
func (c cli) sacct(ctx context.Context, id string) (*job, error) {
	out, err := c.run(ctx, "sacct", "-X", "-n", "-P", "-j", id, "-o", "JobIDRaw,State,ExitCode,NodeList,Partition,Start,End,ElapsedRaw,AllocTRES,ConsumedEnergyRaw")
	if err != nil {
		var ce *cmdError
		if errors.As(err, &ce) && (strings.Contains(ce.stderr, "accounting storage is disabled") || strings.Contains(ce.stderr, "not running a supported accounting_storage")) {
			return nil, nil
		}
		return nil, err
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return nil, nil
	}
	return parseSacct(out)
}

// lookup is the job as the controller, else the accounting, knows it; nil when neither does.
func (c cli) lookup(ctx context.Context, id string) (*job, error) {
	j, err := c.showJob(ctx, id)
	if err != nil || j != nil {
		return j, err
	}
	return c.sacct(ctx, id)
}
