package attest

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/evalmesh/evalmesh/scoring"
)

// EnvelopeFile is one envelope as read from somewhere: a name to report it by (a file
// name, a peer) and its bytes exactly as received.
type EnvelopeFile struct {
	Name string
	Data []byte
}

// Refusal is an envelope that did not verify (or could not be read), and why.
type Refusal struct {
	File string `json:"file"`
	ID   string `json:"id,omitempty"` // EnvelopeID of the bytes, when they were read
	// Reason is the verification Reason ("bad signature", "unknown lab", …), or
	// "unreadable" / "too large" for a file that could not be taken in.
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// String is the one-line form the CLI prints.
func (r Refusal) String() string {
	s := r.File + ": " + r.Reason
	if r.Detail != "" && r.Detail != r.Reason {
		s += " (" + r.Detail + ")"
	}
	return s
}

// LedgerReport says what became of every envelope given to BuildLedger.
type LedgerReport struct {
	Read    int       `json:"read"`    // envelopes (files) taken in
	Refused []Refusal `json:"refused"` // did not verify, sorted by file name
	// Verified envelopes split into runs counted, runs excluded (Excluded says why),
	// re-scores, and statements of other predicate types (verified, never counted).
	Counted       int        `json:"counted"`
	Excluded      []Excluded `json:"excluded"`
	Rescores      int        `json:"rescores"`
	Orphans       int        `json:"orphan_rescores"` // re-scores of runs not in the set (or equivocating)
	Other         int        `json:"other"`
	Witnesses     int        `json:"witnesses"`     // witness records (witness.go)
	Equivocations int        `json:"equivocations"` // evidence pairs
	Disagreements int        `json:"disagreements"`
	Duplicates    int        `json:"duplicate_ids"` // the same bytes given more than once
	// Misconduct is the proven misbehaviour in the set (ProvenMisconduct), each saying
	// whether it sets its principal's results aside under the policy.
	Misconduct []Misconduct `json:"misconduct"`
	// RefusedCampaigns are the campaigns refused at admission by the per-lab caps
	// (Outcome.AdmitCampaigns): none of their runs count (ExcludeCampaignOverCap).
	RefusedCampaigns []RefusedCampaign `json:"refused_campaigns,omitempty"`
	// CountedIDs are the attestation IDs of the counted runs, in the ledger's order (what
	// `evalmesh verify-ledger` re-scores); outside the JSON, which keeps its shape.
	CountedIDs []string `json:"-"`
	// Verdicts are the counted runs that signed no score (RunPredicate.ScoreAbsent), by
	// attestation ID, as their scoring labs judged them: what a reader shows as the run's
	// validity and score. Outside the JSON, like CountedIDs.
	Verdicts map[string]scoring.Result `json:"-"`
	// Claims and Releases count the claim and release records (claimrec.go). Unanswered
	// lists the held attempts with no signed outcome by their holder, and UnansweredByLab
	// how many of them are charged to each principal (their campaign's deadline passed at
	// LedgerInput.Now); present where the policy requires claim records.
	Claims          int            `json:"claims,omitempty"`
	Releases        int            `json:"releases,omitempty"`
	Unanswered      []Unanswered   `json:"unanswered,omitempty"`
	UnansweredByLab map[string]int `json:"charged_attempts,omitempty"`
	// Audits are the audits of counted runs as the ledger judged them (audit_ledger.go);
	// present where the network document sets ledger.audits.
	Audits []AuditRecord `json:"audits,omitempty"`
	// NoVotes are the re-scores that do not vote on their run because their lab was not
	// drawn to re-score it (AcceptPolicy.RescorerDraw, Outcome.NoVotes); present where the
	// policy draws re-scorers.
	NoVotes []NoVote `json:"no_vote_rescores,omitempty"`
	// Held are the (lab, agent) groups whose unaudited results would move their agent's
	// rank and wait for audits (movers.go, ExcludeMoverHeld): what the coordinator audits
	// at the movers' rate. Present where ledger.audits holds any.
	Held []HeldGroup `json:"held,omitempty"`
}

// LedgerInput is everything the ledger is a function of (docs/design.md §7): the envelopes, the
// trust store they are verified under, the tasks' metadata, the acceptance policy and the
// scoring options. Not the clock: each certificate is checked at the time its statement
// claims (VerifyOptions.AtClaimedTime), so honest nodes agree on the root whenever they
// compute it, and a node retired by letting its certificate expire keeps its history.
type LedgerInput struct {
	Envelopes []EnvelopeFile
	Trust     *TrustStore
	// Cache remembers verdicts across calls (a node recomputing its ledger as attestations
	// arrive verifies each envelope once); nil verifies everything afresh.
	Cache *Cache
	// Now never moves the ledger or its root (see above): it only dates which unanswered
	// attempts the report charges to their lab (LedgerReport.Unanswered); zero charges none.
	Now     time.Time
	Tasks   []scoring.TaskInfo
	Policy  AcceptPolicy
	Scoring scoring.Options
	// Campaigns, when not nil, are the windows of the campaigns the ledger knows (by
	// campaign ID): a run counts only inside its campaign's window, and a run of a campaign
	// not listed does not count. It overrides Policy.Campaigns. nil checks no windows
	// (results of slots that name no signed campaign, as the tests and the demo have).
	Campaigns map[string]CampaignWindow
}

// BuildLedger verifies the envelopes (in one batch, each certificate at the time its
// statement claims: VerifyOptions.AtClaimedTime) and computes the ledger of the values that
// verified with LedgerFromVerified: the bytes API (the CLI, verify-ledger) is verification,
// then the values API. It reads no files: the envelopes come in as bytes. An envelope that
// does not verify is a Refusal in the report, not an error; errors are for inputs the ledger
// itself refuses (scoring options, task metadata).
//
// When in.Policy.Tasks is nil, runs are matched to in.Tasks by name (Slot.Task must be the
// task's name); a run naming no known task is excluded as ExcludeUnknownTask either way.
func BuildLedger(in LedgerInput) (*scoring.Ledger, *LedgerReport, error) {
	if in.Trust == nil {
		return nil, nil, errors.New("attest: BuildLedger needs a trust store")
	}
	raw := make([][]byte, len(in.Envelopes))
	for i, f := range in.Envelopes {
		raw[i] = f.Data
	}
	var vs []*Verified
	var errs []error
	at := VerifyOptions{AtClaimedTime: true}
	if in.Cache != nil {
		vs, errs = in.Cache.VerifyBatchWith(raw, in.Trust, at)
	} else {
		vs, errs = VerifyBatchWith(raw, in.Trust, at)
	}
	ok := make([]*Verified, 0, len(vs))
	refused := []Refusal{} // JSON [] when none
	for i, v := range vs {
		if errs[i] != nil {
			r := Refusal{File: in.Envelopes[i].Name, ID: EnvelopeID(raw[i]), Reason: errs[i].Error()}
			var ve *VerifyError
			if errors.As(errs[i], &ve) {
				r.Reason, r.Detail = string(ve.Reason), ve.Detail
			}
			refused = append(refused, r)
			continue
		}
		ok = append(ok, v)
	}
	sortRefusals(refused)
	l, rep, err := LedgerFromVerified(ok, in)
	if rep != nil {
		rep.Read, rep.Refused = len(in.Envelopes), refused
	}
	return l, rep, err
}

// LedgerFromVerified is the ledger of values verified earlier, held in memory (a node's
// store keeps the value its verification made on arrival, and restores with Restore those
// it holds from before): nothing is parsed or verified again, which makes a daemon's
// recomputation several times cheaper than BuildLedger over the same bytes (node's
// BenchmarkLedgerRecompute). The values are only read, so they may be shared between calls.
// The same value given twice counts once (LedgerReport.Duplicates). in.Envelopes and
// in.Cache are not used; in.Trust is not applied again (TrustStore.Recheck does that).
func LedgerFromVerified(vs []*Verified, in LedgerInput) (*scoring.Ledger, *LedgerReport, error) {
	rep := &LedgerReport{Read: len(vs)}
	ok := make([]*Verified, 0, len(vs))
	ids := make(map[string]bool, len(vs))
	for _, v := range vs {
		if ids[v.ID] {
			rep.Duplicates++
			continue
		}
		ids[v.ID] = true
		ok = append(ok, v)
	}
	return ledgerOf(ok, rep, in)
}

// ledgerOf reconciles verified envelopes, applies the acceptance policy and scores.
func ledgerOf(ok []*Verified, rep *LedgerReport, in LedgerInput) (*scoring.Ledger, *LedgerReport, error) {
	o := Reconcile(ok, Agree)
	p := in.Policy
	if in.Campaigns != nil {
		p.Campaigns = in.Campaigns
	}
	known := make(map[string]bool, len(in.Tasks))
	for _, t := range in.Tasks {
		known[t.Name] = true
	}
	if p.Tasks == nil {
		p.Tasks = make(map[string]string, len(in.Tasks))
		for _, t := range in.Tasks {
			p.Tasks[t.Name] = t.Name
		}
	} else {
		// A map naming a task the ledger has no metadata for would make ComputeLedger fail
		// on the whole set; such runs are excluded instead.
		m := make(map[string]string, len(p.Tasks))
		for cid, name := range p.Tasks {
			if known[name] {
				m[cid] = name
			}
		}
		p.Tasks = m
	}
	o = o.WithUnblockedAttempts(p).WithRescorerDraw(p.RescorerDraw)
	rep.NoVotes = o.NoVotes
	results, excluded := Accept(o, p)
	if p.Audits != nil && p.Audits.HoldMovers {
		var held []Excluded
		results, held, rep.Held = HoldMovers(o, p, results, in.Tasks, in.Scoring)
		if len(held) > 0 {
			excluded = append(excluded, held...)
			slices.SortFunc(excluded, func(a, b Excluded) int { return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Reason, b.Reason)) })
		}
	}
	rep.Counted, rep.Excluded = len(results), append([]Excluded{}, excluded...) // JSON [] when none
	for _, r := range results {
		rep.CountedIDs = append(rep.CountedIDs, r.AttestationID)
		if run := o.run(r.AttestationID); run != nil && run.Run.ScoreAbsent {
			if rep.Verdicts == nil {
				rep.Verdicts = map[string]scoring.Result{}
			}
			rep.Verdicts[r.AttestationID] = r
		}
	}
	for _, rs := range o.Rescores {
		rep.Rescores += len(rs)
	}
	rep.Rescores += len(o.Disagreements)
	for _, rs := range o.Verdicts { // scoring labs' verdicts on unscored runs (scorers.go)
		rep.Rescores += len(rs)
	}
	rep.Orphans, rep.Other, rep.Witnesses = len(o.Orphans), len(o.Other), len(o.Witnesses)
	rep.Equivocations, rep.Disagreements = len(o.Equivocations), len(o.Disagreements)
	rep.Claims, rep.Releases = len(o.Claims), len(o.Releases)
	if p.RequireClaimRecords {
		rep.Unanswered = o.UnansweredAttempts(p, in.Now)
		for _, u := range rep.Unanswered {
			if u.Charged {
				if rep.UnansweredByLab == nil {
					rep.UnansweredByLab = map[string]int{}
				}
				rep.UnansweredByLab[u.Principal]++
			}
		}
	}
	rep.RefusedCampaigns = o.RefusedCampaigns(p)
	rep.Misconduct = []Misconduct{} // JSON [] when none
	for _, m := range slices.Concat(ProvenMisconduct(o), ScorerMisconduct(o, p), AuditMisconduct(o, p)) {
		m.SetAside = p.SetAsideOffenders && !p.Pardoned[m.Evidence]
		rep.Misconduct = append(rep.Misconduct, m)
	}
	rep.Audits = AuditRecords(o, p)

	l, err := scoring.ComputeLedger(results, in.Tasks, in.Scoring)
	if err != nil {
		return nil, rep, err
	}
	return l, rep, nil
}

// LedgerFromDir reads every envelope file (*.json) directly under dir and computes the
// ledger with BuildLedger; in.Envelopes, if any, are verified along with them. A file that
// cannot be read, or is larger than MaxEnvelopeSize, is a Refusal like a bad signature.
func LedgerFromDir(dir string, in LedgerInput) (*scoring.Ledger, *LedgerReport, error) {
	files, refused, err := ReadEnvelopeDir(dir)
	if err != nil {
		return nil, nil, err
	}
	in.Envelopes = append(slices.Clip(in.Envelopes), files...)
	l, rep, err := BuildLedger(in)
	if rep != nil {
		rep.Read += len(refused)
		rep.Refused = append(rep.Refused, refused...)
		sortRefusals(rep.Refused)
	}
	return l, rep, err
}

// ReadEnvelopeDir reads the envelope files directly under dir: regular files named *.json,
// skipping hidden ones (half-written temporary files of an atomic write start with a dot).
// Files are returned sorted by name. A missing dir is an error that says so; a file that
// cannot be read or is too large is a Refusal.
func ReadEnvelopeDir(dir string) ([]EnvelopeFile, []Refusal, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("attestations folder %s does not exist: run some evaluations first, or name the folder holding the envelopes", dir)
		}
		return nil, nil, fmt.Errorf("reading attestations folder: %w", err)
	}
	var files []EnvelopeFile
	var refused []Refusal
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := ReadEnvelopeFile(path)
		if err != nil {
			var big errTooLarge
			switch {
			case errors.As(err, &big):
				refused = append(refused, Refusal{File: path, Reason: "too large", Detail: err.Error()})
			case errors.Is(err, ErrNotRegular):
				refused = append(refused, Refusal{File: path, Reason: "not a regular file", Detail: err.Error()})
			default:
				refused = append(refused, Refusal{File: path, Reason: "unreadable", Detail: err.Error()})
			}
			continue
		}
		files = append(files, EnvelopeFile{Name: path, Data: data})
	}
	return files, refused, nil
}

// ErrNotRegular is returned (wrapped, naming the file) by ReadEnvelopeFile for a named pipe,
// device, socket or folder: opening a pipe would wait for a writer forever.
var ErrNotRegular = errors.New("not a regular file")

type errTooLarge struct{ path string }

func (e errTooLarge) Error() string {
	return fmt.Sprintf("%s is over %d bytes, larger than any attestation", e.path, MaxEnvelopeSize)
}

// ReadEnvelopeFile reads an envelope (or statement) file of at most MaxEnvelopeSize bytes:
// a flood costs a megabyte, not the node's memory, and a named pipe or device named *.json
// is refused (ErrNotRegular) without waiting on it. The type is checked before opening (a
// symlink must point at a regular file), the open does not block (O_NONBLOCK: the file may
// be swapped for a pipe in between) and the opened file is checked again.
func ReadEnvelopeFile(path string) ([]byte, error) {
	st, err := os.Stat(path) // follows a symlink: its target must be regular
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fileKind(st.Mode()))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fileKind(st.Mode()))
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxEnvelopeSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxEnvelopeSize {
		return nil, errTooLarge{path}
	}
	return b, nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a folder"
	}
	return "mode " + m.String()
}

func sortRefusals(r []Refusal) {
	slices.SortFunc(r, func(a, b Refusal) int { return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.ID, b.ID)) })
}
