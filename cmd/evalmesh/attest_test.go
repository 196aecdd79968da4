package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
)

// labFlow sets up a lab, a certified node home and a trust file in a temp dir.
type labFlow struct {
	dir, home, lab, trust, peerID string
}

func newLabFlow(t *testing.T) *labFlow {
	t.Helper()
	d := t.TempDir()
	f := &labFlow{dir: d, home: filepath.Join(d, "node"), lab: filepath.Join(d, "lab"), trust: filepath.Join(d, "trust.yaml")}
	mustCLI(t, "init", "--home", f.home)
	var id struct {
		PeerID string `json:"peer_id"`
	}
	json.Unmarshal([]byte(mustCLI(t, "id", "--home", f.home, "--json")), &id)
	f.peerID = id.PeerID
	labID := strings.TrimSpace(mustCLI(t, "lab", "init", "--dir", f.lab, "--name", "acme"))
	if !strings.HasPrefix(labID, attest.LabIDPrefix) {
		t.Fatalf("lab init printed %q, want a lab ID", labID)
	}
	mustCLI(t, "lab", "certify", "--dir", f.lab, "--node", f.peerID, "--from", "2026-01-01T00:00:00Z", "--valid", "30d",
		"--out", filepath.Join(f.home, "node-cert.json"))
	mustCLI(t, "trust", "add", "--trust", f.trust, "--lab", f.lab)
	return f
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, stderr := cliRun(t, args...)
	if code != 0 {
		t.Fatalf("evalmesh %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	return out
}

func (f *labFlow) write(t *testing.T, name, content string) string {
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runStatement(t *testing.T, node, lab string) string {
	score := 0.75
	st, err := attest.NewStatement(
		[]attest.Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)}, Annotations: map[string]any{"role": "submission"}}},
		attest.PredicateRunV1, attest.RunPredicate{
			Slot: attest.Slot{Campaign: "c", Task: "t", Agent: "a"}, Node: node, Lab: lab,
			Start: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 1, 5, 1, 0, 0, 0, time.UTC),
			Valid: true, Score: &score, Metric: "accuracy", Evaluator: "builtin:accuracy",
		})
	if err != nil {
		t.Fatal(err)
	}
	return string(st)
}

func TestLabInitRefusesOverwriteAndKeepsKeyPrivate(t *testing.T) {
	f := newLabFlow(t)
	st, err := os.Stat(filepath.Join(f.lab, attest.LabKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("lab.key: %v mode %v, want 0600", err, st.Mode().Perm())
	}
	code, _, stderr := cliRun(t, "lab", "init", "--dir", f.lab)
	if code == 0 || !strings.Contains(stderr, "already exists") {
		t.Fatalf("second lab init: %d %q", code, stderr)
	}
}

func TestCertifyPrintsCertificateJSON(t *testing.T) {
	f := newLabFlow(t)
	out := mustCLI(t, "lab", "certify", "--dir", f.lab, "--node", f.peerID, "--from", "2026-03-01T00:00:00Z", "--valid", "48h")
	cert, err := attest.ParseNodeCert([]byte(strings.TrimSpace(out)))
	if err != nil {
		t.Fatalf("certify output is not a certificate: %v\n%s", err, out)
	}
	want := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
	if cert.Node != f.peerID || !cert.NotAfter.Equal(want) {
		t.Fatalf("cert node %s not_after %s, want %s %s", cert.Node, cert.NotAfter, f.peerID, want)
	}
	for _, bad := range [][]string{{"--valid", "-3d"}, {"--valid", "soon"}, {"--node", "not-a-peer"}} {
		args := append([]string{"lab", "certify", "--dir", f.lab, "--node", f.peerID}, bad...)
		if code, _, stderr := cliRun(t, args...); code == 0 || stderr == "" {
			t.Errorf("certify %v accepted", bad)
		}
	}
}

func TestSignAndVerify(t *testing.T) {
	f := newLabFlow(t)
	var info attest.LabInfo
	b, _ := os.ReadFile(filepath.Join(f.lab, attest.LabInfoFile))
	json.Unmarshal(b, &info)
	stPath := f.write(t, "st.json", runStatement(t, f.peerID, info.ID))
	envPath := filepath.Join(f.dir, "env.json")
	// The home's node-cert.json is used when --cert is not given.
	mustCLI(t, "attest", "sign", "--home", f.home, stPath, "--out", envPath)

	out := mustCLI(t, "attest", "verify", "--trust", f.trust, envPath, "--at", "2026-01-10T00:00:00Z", "--json")
	var res struct {
		OK     bool   `json:"ok"`
		Lab    string `json:"lab"`
		Counts bool   `json:"counts"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.OK || res.Lab != info.ID || !res.Counts {
		t.Fatalf("verify --json: %s", out)
	}

	refused := func(reason attest.Reason, args ...string) {
		t.Helper()
		code, _, stderr := cliRun(t, append([]string{"attest", "verify", "--trust", f.trust}, args...)...)
		if code != 1 {
			t.Fatalf("verify %v: exit %d, want 1", args, code)
		}
		if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 || !strings.Contains(lines[0], string(reason)) {
			t.Fatalf("verify %v: stderr %q, want one line with %q", args, stderr, reason)
		}
	}
	refused(attest.ReasonCertExpired, envPath, "--at", "2026-03-01T00:00:00Z")
	refused(attest.ReasonCertNotYetValid, envPath, "--at", "2025-12-01T00:00:00Z")
	env, _ := os.ReadFile(envPath)
	tampered := f.write(t, "tampered.json", strings.Replace(string(env), `"payload":"ey`, `"payload":"ez`, 1))
	refused(attest.ReasonBadSignature, tampered, "--at", "2026-01-10T00:00:00Z")
	refused(attest.ReasonMalformedEnvelope, f.write(t, "junk.json", "{"), "--at", "2026-01-10T00:00:00Z")

	// A trust file without the lab: unknown lab.
	other := filepath.Join(f.dir, "other.yaml")
	mustCLI(t, "trust", "add", "--trust", other, "--key", "8jO3llk1VFAI2toO//YNjsB26i0VUzM5ce7g1PH7Lno=", "--name", "beta")
	code, _, stderr := cliRun(t, "attest", "verify", "--trust", other, envPath, "--at", "2026-01-10T00:00:00Z")
	if code != 1 || !strings.Contains(stderr, string(attest.ReasonUnknownLab)) {
		t.Fatalf("unknown lab: %d %q", code, stderr)
	}

	// Revocation through the CLI.
	revPath := filepath.Join(f.dir, "rev.json")
	mustCLI(t, "lab", "revoke", "--dir", f.lab, "--node", f.peerID, "--at", "2026-01-07T00:00:00Z", "--out", revPath)
	mustCLI(t, "trust", "add", "--trust", f.trust, "--revocation", revPath)
	mustCLI(t, "attest", "verify", "--trust", f.trust, envPath, "--at", "2026-01-06T00:00:00Z")
	refused(attest.ReasonCertRevoked, envPath, "--at", "2026-01-08T00:00:00Z")
}

func TestSignWithoutCertificateNeedsDirectTrust(t *testing.T) {
	f := newLabFlow(t)
	os.Remove(filepath.Join(f.home, "node-cert.json"))
	stPath := f.write(t, "st.json", runStatement(t, f.peerID, ""))
	env := mustCLI(t, "attest", "sign", "--home", f.home, stPath)
	envPath := f.write(t, "env.json", env)
	code, _, stderr := cliRun(t, "attest", "verify", "--trust", f.trust, envPath)
	if code != 1 || !strings.Contains(stderr, string(attest.ReasonUnknownNode)) {
		t.Fatalf("uncertified node: %d %q", code, stderr)
	}
	// The refusal names the command that fixes it (--key would add a lab key instead).
	if !strings.Contains(stderr, "evalmesh trust add --node-key") {
		t.Fatalf("unknown node refusal %q does not point at `trust add --node-key`", stderr)
	}
	var id struct {
		PublicKey string `json:"public_key"`
	}
	json.Unmarshal([]byte(mustCLI(t, "id", "--home", f.home, "--json")), &id)
	mustCLI(t, "trust", "add", "--trust", f.trust, "--node-key", id.PublicKey, "--name", "laptop")
	mustCLI(t, "attest", "verify", "--trust", f.trust, envPath)

	list := mustCLI(t, "trust", "list", "--trust", f.trust)
	if !strings.Contains(list, "acme") || !strings.Contains(list, f.peerID) {
		t.Fatalf("trust list:\n%s", list)
	}
}

func TestSignRefusesWhatIsNotAStatement(t *testing.T) {
	f := newLabFlow(t)
	p := f.write(t, "st.json", `{"hello":"world"}`)
	code, _, stderr := cliRun(t, "attest", "sign", "--home", f.home, p)
	if code == 0 || !strings.Contains(stderr, "_type") {
		t.Fatalf("signing a non-statement: %d %q", code, stderr)
	}
}

func TestTrustAddValidates(t *testing.T) {
	d := t.TempDir()
	tp := filepath.Join(d, "t.yaml")
	for _, args := range [][]string{
		{"--key", "AAAA", "--name", "x"},
		{"--key", "8jO3llk1VFAI2toO//YNjsB26i0VUzM5ce7g1PH7Lno="},
		{"--lab", d, "--key", "8jO3llk1VFAI2toO//YNjsB26i0VUzM5ce7g1PH7Lno="},
		{"--lab", filepath.Join(d, "missing")},
	} {
		if code, _, _ := cliRun(t, append([]string{"trust", "add", "--trust", tp}, args...)...); code == 0 {
			t.Errorf("trust add %v accepted", args)
		}
	}
	if _, err := os.Stat(tp); err == nil {
		t.Error("a failed trust add wrote the file")
	}
}

// handSign signs arbitrary statement bytes with the home's key and the home's certificate,
// independently of package attest (crypto/ed25519 over a hand-built PAE): `attest sign`
// refuses malformed statements, but a peer may still receive them.
func (f *labFlow) handSign(t *testing.T, statement string) []byte {
	t.Helper()
	h, err := home.Resolve(f.home)
	if err != nil {
		t.Fatal(err)
	}
	key, err := h.Identity()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := key.Raw()
	cert, err := os.ReadFile(filepath.Join(f.home, "node-cert.json"))
	if err != nil {
		t.Fatal(err)
	}
	const pt = "application/vnd.in-toto+json"
	pae := fmt.Sprintf("DSSEv1 %d %s %d %s", len(pt), pt, len(statement), statement)
	sig := ed25519.Sign(ed25519.PrivateKey(raw), []byte(pae))
	env, err := json.Marshal(map[string]any{
		"payloadType": pt, "payload": base64.StdEncoding.EncodeToString([]byte(statement)),
		"signatures": []any{map[string]any{"keyid": f.peerID, "sig": base64.StdEncoding.EncodeToString(sig),
			"extension": map[string]any{"kind": attest.CertExtensionKind, "ext": json.RawMessage(bytes.TrimSpace(cert))}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// The ID `attest sign` prints is the CID of the bytes it writes (no trailing newline), and
// the one `attest verify` reports for the saved file.
func TestSignPrintsTheIDOfTheBytesItWrites(t *testing.T) {
	f := newLabFlow(t)
	var info attest.LabInfo
	b, _ := os.ReadFile(filepath.Join(f.lab, attest.LabInfoFile))
	json.Unmarshal(b, &info)
	stPath := f.write(t, "st.json", runStatement(t, f.peerID, info.ID))

	code, stdout, stderr := cliRun(t, "attest", "sign", "--home", f.home, stPath)
	if code != 0 {
		t.Fatalf("sign: %d %s", code, stderr)
	}
	var printed string
	for _, l := range strings.Split(stderr, "\n") {
		if id, ok := strings.CutPrefix(l, "id "); ok {
			printed = id
		}
	}
	if got := attest.EnvelopeID([]byte(stdout)); got != printed {
		t.Fatalf("sign printed id %s, but the CID of its output is %s (output ends %q)", printed, got, stdout[len(stdout)-3:])
	}
	outPath := filepath.Join(f.dir, "env.json")
	mustCLI(t, "attest", "sign", "--home", f.home, stPath, "--out", outPath)
	saved, _ := os.ReadFile(outPath)
	if attest.EnvelopeID(saved) != printed {
		t.Fatalf("--out file has ID %s, want %s", attest.EnvelopeID(saved), printed)
	}
	var res struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(mustCLI(t, "attest", "verify", "--trust", f.trust, outPath, "--at", "2026-01-10T00:00:00Z", "--json")), &res)
	if res.ID != printed {
		t.Fatalf("verify reports id %s, sign printed %s", res.ID, printed)
	}
}

// What a peer may receive but `attest sign` would not make: each refused with exit 1 and one
// line naming the reason; a foreign predicate type verifies but does not count; the URL-safe
// base64 alphabet is accepted.
func TestVerifyCLIStatementsFromElsewhere(t *testing.T) {
	f := newLabFlow(t)
	var info attest.LabInfo
	b, _ := os.ReadFile(filepath.Join(f.lab, attest.LabInfoFile))
	json.Unmarshal(b, &info)
	at := "2026-01-10T00:00:00Z"
	good := runStatement(t, f.peerID, info.ID)

	// The independent signer's good envelope verifies: the test's signer is right.
	mustCLI(t, "attest", "verify", "--trust", f.trust, "--at", at, f.write(t, "good.json", string(f.handSign(t, good))))

	for _, c := range []struct {
		name, statement string
		reason          attest.Reason
	}{
		{"malformed statement", strings.Replace(good, attest.StatementTypeV1, "https://in-toto.io/Statement/v0.1", 1), attest.ReasonMalformedStatement},
		{"not json", `{"_type":`, attest.ReasonMalformedStatement},
		{"malformed predicate", strings.Replace(good, `"metric":"accuracy"`, `"metric":""`, 1), attest.ReasonMalformedPredicate},
		{"predicate of wrong shape", strings.Replace(good, `"seed":0`, `"seed":"zero"`, 1), attest.ReasonMalformedPredicate},
	} {
		if c.statement == good {
			t.Fatalf("%s: the edit did not apply", c.name)
		}
		p := f.write(t, strings.ReplaceAll(c.name, " ", "_")+".json", string(f.handSign(t, c.statement)))
		code, stdout, stderr := cliRun(t, "attest", "verify", "--trust", f.trust, "--at", at, p)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 1 || stdout != "" || len(lines) != 1 || !strings.Contains(lines[0], string(c.reason)) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", c.name, code, stdout, stderr, c.reason)
		}
	}

	other := `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"x","digest":{"sha256":"` + strings.Repeat("cd", 32) + `"}}],"predicateType":"https://slsa.dev/provenance/v1","predicate":{"buildDefinition":{}}}`
	op := f.write(t, "other.json", string(f.handSign(t, other)))
	text := mustCLI(t, "attest", "verify", "--trust", f.trust, "--at", at, op)
	if !strings.Contains(text, "does not count for the ledger") {
		t.Errorf("foreign predicate: %q does not say it does not count", text)
	}
	var res struct {
		OK     bool `json:"ok"`
		Counts bool `json:"counts"`
	}
	json.Unmarshal([]byte(mustCLI(t, "attest", "verify", "--trust", f.trust, "--at", at, "--json", op)), &res)
	if !res.OK || res.Counts {
		t.Errorf("foreign predicate --json: %+v, want ok and not counting", res)
	}

	// URL-safe, unpadded: the same signature, another alphabet.
	var m map[string]any
	json.Unmarshal(f.handSign(t, good), &m)
	url := func(s string) string {
		d, _ := base64.StdEncoding.DecodeString(s)
		return base64.RawURLEncoding.EncodeToString(d)
	}
	m["payload"] = url(m["payload"].(string))
	s0 := m["signatures"].([]any)[0].(map[string]any)
	s0["sig"] = url(s0["sig"].(string))
	ub, _ := json.Marshal(m)
	if !strings.ContainsAny(string(ub), "-_") {
		t.Log("URL-safe encoding happens to use no - or _ here")
	}
	mustCLI(t, "attest", "verify", "--trust", f.trust, "--at", at, f.write(t, "url.json", string(ub)))
}

// Signing with a certificate outside its window works but says, on stderr, that verifiers
// will refuse the envelope; inside the window it says nothing of the kind.
func TestSignWarnsAboutACertificateOutsideItsWindow(t *testing.T) {
	f := newLabFlow(t) // certificate valid 2026-01-01 for 30 days
	var info attest.LabInfo
	b, _ := os.ReadFile(filepath.Join(f.lab, attest.LabInfoFile))
	json.Unmarshal(b, &info)
	stPath := f.write(t, "st.json", runStatement(t, f.peerID, info.ID))
	defer func(old func() time.Time) { labNow = old }(labNow)
	for _, c := range []struct {
		now  string
		warn bool
	}{{"2026-01-10T00:00:00Z", false}, {"2026-03-01T00:00:00Z", true}, {"2025-12-01T00:00:00Z", true}} {
		at, _ := time.Parse(time.RFC3339, c.now)
		labNow = func() time.Time { return at }
		code, _, stderr := cliRun(t, "attest", "sign", "--home", f.home, stPath)
		if code != 0 {
			t.Fatalf("sign at %s: exit %d: %s", c.now, code, stderr)
		}
		if got := strings.Contains(stderr, "verifiers will refuse"); got != c.warn {
			t.Errorf("sign at %s: warning %v, want %v (stderr %q)", c.now, got, c.warn, stderr)
		}
	}
}

// A crash between writing lab.key and lab.json leaves a key whose lab cannot be trusted
// (`trust add --lab` reads lab.json): `lab init` again restores lab.json from the kept key.
func TestLabInitFinishesAnInterruptedInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	id := strings.TrimSpace(mustCLI(t, "lab", "init", "--dir", dir, "--name", "acme"))
	key, _ := os.ReadFile(filepath.Join(dir, attest.LabKeyFile))
	os.Remove(filepath.Join(dir, attest.LabInfoFile))
	if again := strings.TrimSpace(mustCLI(t, "lab", "init", "--dir", dir, "--name", "acme")); again != id {
		t.Fatalf("lab init after a lost lab.json printed %s, want the kept key's %s", again, id)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, attest.LabKeyFile)); !bytes.Equal(after, key) {
		t.Fatal("lab init replaced the key")
	}
	info, err := attest.LoadLabInfo(dir)
	if err != nil || info.ID != id || info.Name != "acme" {
		t.Fatalf("restored lab.json: %+v %v", info, err)
	}
	mustCLI(t, "trust", "add", "--trust", filepath.Join(t.TempDir(), "t.yaml"), "--lab", dir)
}

// `attest verify` refuses a file over the envelope limit without reading it whole, and a
// named pipe without waiting on it.
func TestVerifyCLIRefusesHugeFilesAndPipes(t *testing.T) {
	f := newLabFlow(t)
	huge := filepath.Join(f.dir, "huge.json")
	if err := os.WriteFile(huge, make([]byte, 4*attest.MaxEnvelopeSize), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cliRun(t, "attest", "verify", "--trust", f.trust, huge)
	if code == 0 || !strings.Contains(stderr, "larger than any attestation") {
		t.Fatalf("verify of a 4 MiB file: exit %d %q, want it refused by size before reading", code, stderr)
	}
	pipe := filepath.Join(f.dir, "pipe.json")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	type res struct {
		code   int
		stderr string
	}
	done := make(chan res, 1)
	go func() {
		code, _, stderr := cliRun(t, "attest", "verify", "--trust", f.trust, pipe)
		done <- res{code, stderr}
	}()
	var r res
	testutil.WaitFor(t, 20*time.Second, "attest verify of a named pipe to return", func() bool {
		select {
		case r = <-done:
			return true
		default:
			return false
		}
	})
	if r.code == 0 || !strings.Contains(r.stderr, "not a regular file (a named pipe)") {
		t.Fatalf("verify of a pipe: exit %d %q", r.code, r.stderr)
	}
}
