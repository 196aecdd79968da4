package slurm

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/runner/slurm/slurmtest"
)

// BenchmarkJobQuery compares the two ways to ask Slurm about a job (what Wait does every
// poll): the scontrol command this executor uses, and slurmrestd's REST API (Debian's
// slurmrestd package, local auth over a unix socket) where it is installed. Run with
// `go test -run '^$' -bench JobQuery ./runner/slurm/`; the ns/op of the two sub-benchmarks
// give the ratio.
func BenchmarkJobQuery(b *testing.B) {
	c := slurmtest.Shared(b)
	id := strings.TrimSpace(c.Run(b, "sbatch", "--parsable", "--output=/dev/null", "--wrap", "true"))
	x := cli{env: []string{"SLURM_CONF=" + c.Conf}}
	b.Run("scontrol", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if j, err := x.showJob(context.Background(), id); err != nil || j == nil {
				b.Fatalf("showJob: %+v, %v", j, err)
			}
		}
	})
	b.Run("slurmrestd", func(b *testing.B) {
		bin, err := exec.LookPath("slurmrestd")
		if err != nil {
			if _, err := os.Stat("/usr/sbin/slurmrestd"); err != nil {
				b.Skip("slurmrestd not installed (apt-get install slurmrestd)")
			}
			bin = "/usr/sbin/slurmrestd"
		}
		sock := filepath.Join(b.TempDir(), "restd.sock")
		// Only the controller's API: the accounting one (dbv0.0.38) needs slurmdbd.
		cmd := exec.Command(bin, "-a", "rest_auth/local", "-s", "openapi/v0.0.38", "unix:"+sock)
		// Its refusal to run as root is a deployment rule, not a cost; the test runs as root.
		cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf, "SLURMRESTD_SECURITY=disable_user_check")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
		get := func() (int, string) {
			resp, err := hc.Get("http://restd/slurm/v0.0.38/job/" + id)
			if err != nil {
				return 0, err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		if err := testutil.Poll(10*time.Second, func() bool { code, _ := get(); return code == 200 }); err != nil {
			code, body := get()
			b.Skipf("slurmrestd does not answer: %d %.300s\n%s", code, body, out.String())
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if code, body := get(); code != 200 || !strings.Contains(body, `"job_state"`) {
				b.Fatalf("GET job: %d %.300s", code, body)
			}
		}
	})
}
