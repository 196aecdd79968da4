package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/protocol"
)

// The protocol end to end over real gossipsub: honest nodes run the real claim machine
// against campaigns, claims and attestations that arrive through the real validators, with
// a fake executor whose runs end the moment they start. The daemon's main loop is a later
// issue; claimDriver is the smallest loop that does the machine's I/O.

// claimWorld is what every driver shares: the ground truth the test checks.
type claimWorld struct {
	mu       sync.Mutex
	starts   map[string]int          // slot ID → runs started
	live     map[string]int          // slot ID → runs started and not failed (all valid here)
	dups     int                     // runs started while another run of the slot had started
	latency  []time.Duration         // claim published → run started, per run
	heard    map[peer.ID]int         // claims delivered to a machine, by author
	campaign map[string]map[int]bool // campaign ID → drivers it was delivered to
	results  map[string]bool         // slot IDs with a delivered run attestation (at any node)
	byNode   []map[string]bool       // per driver: slots it knows are finished
	aborts   map[string]int          // abort reason → count
	errs     []string                // driver errors (publish failures, ...)
}

func (w *claimWorld) errorf(format string, args ...any) {
	w.mu.Lock()
	w.errs = append(w.errs, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

// claimDriver owns one node's claim machine: one goroutine feeds it the node's deliveries
// and ticks and carries out its actions.
type claimDriver struct {
	i     int
	p     *gossipPeer
	trust *attest.TrustStore
	cache *attest.Cache // shared with the node's attestation validator: each envelope verified once
	w     *claimWorld
	mu    sync.Mutex // guards m (Status is read by the test)
	m     *protocol.ClaimMachine
	// claimedAt is when this node published its claim of a slot (claim→start starts there).
	claimedAt map[string]time.Time
	mine      map[string][]byte // slot ID → our run attestation (for Reannounce)
	seq       uint64            // ClaimMessage.Seq, as the daemon's publisher sets it
}

func (d *claimDriver) run(ctx context.Context, camps, claims, atts <-chan Message) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	apply := func(a protocol.Actions) { d.apply(ctx, a, timer) }
	for {
		var a protocol.Actions
		select {
		case <-ctx.Done():
			return
		case m, ok := <-camps:
			if !ok {
				return
			}
			v, err := protocol.VerifyCampaign(m.Data, d.trust, protocol.CampaignVerifyOptions{Now: time.Now(), Network: gossipNet})
			if err != nil {
				d.w.errorf("node %d: a validated campaign does not verify: %v", d.i, err)
				continue
			}
			d.w.mu.Lock()
			if d.w.campaign[v.ID] == nil {
				d.w.campaign[v.ID] = map[int]bool{}
			}
			d.w.campaign[v.ID][d.i] = true
			d.w.mu.Unlock()
			spec := protocol.CampaignSpec{ID: v.ID, Created: v.Campaign.Created, Deadline: v.Campaign.Deadline}
			for _, s := range v.Campaign.Slots() {
				spec.Slots = append(spec.Slots, protocol.SlotSpec{ID: protocol.SlotID(s), Slot: s})
			}
			d.mu.Lock()
			a = d.m.AddCampaign(spec, time.Now())
			d.mu.Unlock()
		case m, ok := <-claims:
			if !ok {
				return
			}
			if m.Local {
				continue
			}
			cm, err := protocol.DecodeClaim(m.Data)
			if err != nil {
				d.w.errorf("node %d: a validated claim does not decode: %v", d.i, err)
				continue
			}
			d.w.mu.Lock()
			d.w.heard[m.From]++
			d.w.mu.Unlock()
			d.mu.Lock()
			a = d.m.Receive(cm, time.Now())
			d.mu.Unlock()
		case m, ok := <-atts:
			if !ok {
				return
			}
			v, err := d.cache.VerifyWith(m.Data, d.trust, attest.VerifyOptions{AtClaimedTime: true})
			if err != nil || v.Run == nil {
				d.w.errorf("node %d: a validated attestation does not verify: %v", d.i, err)
				continue
			}
			id := protocol.SlotID(v.Run.Slot)
			d.w.mu.Lock()
			d.w.results[id] = true
			d.w.byNode[d.i][id] = true
			d.w.mu.Unlock()
			d.mu.Lock()
			a = d.m.SlotFinished(id, v.Node, time.Now())
			d.mu.Unlock()
		case <-timer.C:
			d.mu.Lock()
			a = d.m.Tick(time.Now())
			d.mu.Unlock()
		}
		apply(a)
	}
}

// apply carries out actions in the order Actions documents; a started run ends at once
// (the fake executor) and what that asks is carried out too.
func (d *claimDriver) apply(ctx context.Context, a protocol.Actions, timer *time.Timer) {
	for {
		for _, ab := range a.Abort {
			d.w.mu.Lock()
			d.w.aborts[ab.Reason]++
			d.w.mu.Unlock()
		}
		for _, msg := range a.Publish {
			if msg.Kind == protocol.ClaimKindClaim {
				if _, ok := d.claimedAt[msg.Slot]; !ok {
					d.claimedAt[msg.Slot] = time.Now()
				}
			}
			d.seq++
			msg.Seq = d.seq // a repeat (a renew, a loser told at once) must not be seen-cache bytes
			b, err := protocol.EncodeClaim(&msg)
			if err != nil {
				d.w.errorf("node %d: encode claim: %v", d.i, err)
				continue
			}
			if err := d.p.ps.Publish(ctx, protocol.TopicClaims, b); err != nil && ctx.Err() == nil {
				d.w.errorf("node %d: publish claim: %v", d.i, err)
			}
		}
		for _, id := range a.Reannounce {
			if env := d.mine[id]; env != nil {
				_ = d.p.ps.Publish(ctx, protocol.TopicAttestations, env) // seen bytes are a no-op
			}
		}
		var next protocol.Actions
		for _, st := range a.Start {
			now := time.Now()
			id := st.Slot.ID
			d.w.mu.Lock()
			d.w.starts[id]++
			if d.w.live[id] > 0 {
				d.w.dups++
			}
			d.w.live[id]++
			if at, ok := d.claimedAt[id]; ok {
				d.w.latency = append(d.w.latency, now.Sub(at))
			}
			d.w.mu.Unlock()
			delete(d.claimedAt, id)
			env := signClaimRun(d.p, st, now)
			d.mine[id] = env
			d.mu.Lock()
			next = merge(next, d.m.RunStarted(id, now))
			d.mu.Unlock()
			if err := d.p.ps.Publish(ctx, protocol.TopicAttestations, env); err != nil && ctx.Err() == nil {
				d.w.errorf("node %d: publish run: %v", d.i, err)
			}
			d.mu.Lock()
			next = merge(next, d.m.RunEnded(id, protocol.RunOutcome{Kind: protocol.RunValid}, time.Now()))
			d.mu.Unlock()
		}
		wake := a.Wake
		if len(a.Start) == 0 {
			if !wake.IsZero() {
				resetTimer(timer, time.Until(wake))
			}
			return
		}
		if !next.Wake.IsZero() {
			wake = next.Wake
		}
		next.Wake = wake
		a = next
	}
}

func merge(a, b protocol.Actions) protocol.Actions {
	a.Publish = append(a.Publish, b.Publish...)
	a.Start = append(a.Start, b.Start...)
	a.Abort = append(a.Abort, b.Abort...)
	a.Reannounce = append(a.Reannounce, b.Reannounce...)
	a.Wake = b.Wake
	return a
}

func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	t.Reset(max(d, 0))
}

// signClaimRun is the fake executor's result: a valid run attestation of the slot, signed
// by the node with its certificate, numbered with the machine's attempt.
func signClaimRun(p *gossipPeer, st protocol.StartRun, now time.Time) []byte {
	score := 1.0
	d := sha256.Sum256([]byte(st.Slot.ID + p.id.String()))
	pred := attest.RunPredicate{
		Slot: st.Slot.Slot, Node: p.id.String(), Lab: p.cert.Lab, Hardware: attest.Hardware{GPUModel: "none", Driver: "none"},
		Start: now, End: now, Attempt: st.Attempt,
		Valid: true, Score: &score, Metric: "accuracy", Evaluator: "builtin:accuracy",
	}
	stmt, err := attest.NewStatement([]attest.Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": hex.EncodeToString(d[:])},
		Annotations: map[string]any{attest.AnnotationRole: attest.RoleSubmission}}}, attest.PredicateRunV1, pred)
	if err != nil {
		panic(err)
	}
	env, _, err := attest.Sign(p.key, p.cert, stmt)
	if err != nil {
		panic(err)
	}
	return env
}

// TestClaimsOverRealGossipsub: 12 honest nodes of 3 labs on 127.0.0.1 and one hostile node
// share a 500-slot campaign (100 under -race) over real gossipsub with every validator in
// place. Every slot finishes (how many nodes learned every result over pubsub alone is
// reported: sync repairs the rest); the hostile node's campaign (signed by a lab nobody
// trusts) and its claims (under a stranger lab's certificate, or an honest node's
// certificate that is not its own) are rejected by the validators of every honest node
// they reach and never reach a claim machine, and nothing of theirs is run.
func TestClaimsOverRealGossipsub(t *testing.T) {
	if testing.Short() {
		t.Skip("13 libp2p hosts")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	labs := []*attest.Lab{newGossipLab(t), newGossipLab(t), newGossipLab(t)}
	stranger := newGossipLab(t)
	trust := attest.NewTrustStore()
	for i, l := range labs {
		if _, err := trust.AddLab(fmt.Sprintf("lab%d", i), l.Pub); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now
	caches := map[*gossipPeer]*attest.Cache{}
	validators := func(p *gossipPeer) map[string]protocol.ValidatorFunc {
		cache, err := attest.NewCache(4096)
		if err != nil {
			t.Fatal(err)
		}
		caches[p] = cache
		return map[string]protocol.ValidatorFunc{
			protocol.TopicCampaigns:    protocol.CampaignValidator(trust, gossipNet, 0, now),
			protocol.TopicAttestations: protocol.AttestationValidator(protocol.AttestationCheck{Trust: trust, Cache: cache}),
			protocol.TopicClaims: func(from peer.ID, data []byte) protocol.Validation {
				return protocol.ValidateClaim(data, from.String(), trust, now())
			},
		}
	}
	const honest = 12
	certify := func(p *gossipPeer, lab *attest.Lab) {
		c, err := lab.Certify(p.id.String(), time.Now().Add(-time.Hour), 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		p.cert = c
	}
	var peers []*gossipPeer
	for i := range honest {
		p := newGossipPeer(t, ctx, nil, validators, PubSubOptions{})
		certify(p, labs[i%len(labs)])
		peers = append(peers, p)
	}
	evil := newGossipPeer(t, ctx, nil, acceptAll, PubSubOptions{})
	certify(evil, stranger) // a certificate, but from a lab nobody trusts

	w := &claimWorld{starts: map[string]int{}, live: map[string]int{}, heard: map[peer.ID]int{},
		campaign: map[string]map[int]bool{}, results: map[string]bool{}, aborts: map[string]int{}}
	drivers := make([]*claimDriver, honest)
	type subs struct{ camps, claims, atts <-chan Message }
	chans := make([]subs, honest)
	for i, p := range peers {
		w.byNode = append(w.byNode, map[string]bool{})
		drivers[i] = &claimDriver{i: i, p: p, trust: trust, cache: caches[p], w: w, claimedAt: map[string]time.Time{}, mine: map[string][]byte{},
			m: protocol.NewClaimMachine(protocol.ClaimConfig{Self: p.id.String(), Lab: p.cert.Lab, Cert: p.cert.Raw(), Capacity: 4})}
		var s subs
		var err error
		var stop func()
		if s.camps, stop, err = p.ps.Subscribe(ctx, protocol.TopicCampaigns); err != nil {
			t.Fatal(err)
		}
		defer stop()
		if s.claims, stop, err = p.ps.Subscribe(ctx, protocol.TopicClaims); err != nil {
			t.Fatal(err)
		}
		defer stop()
		if s.atts, stop, err = p.ps.Subscribe(ctx, protocol.TopicAttestations); err != nil {
			t.Fatal(err)
		}
		defer stop()
		chans[i] = s
	}
	for _, k := range []string{protocol.TopicCampaigns, protocol.TopicClaims, protocol.TopicAttestations} {
		collect(t, ctx, evil, k) // subscribed, so it is in its neighbours' meshes
	}
	all := append(slices.Clone(peers), evil)
	connectGossip(t, all, protocol.TopicCampaigns, protocol.TopicClaims, protocol.TopicAttestations)
	var wg sync.WaitGroup
	for i, d := range drivers {
		wg.Add(1)
		go func() { defer wg.Done(); d.run(ctx, chans[i].camps, chans[i].claims, chans[i].atts) }()
	}
	defer wg.Wait()
	defer cancel()

	// 5 tasks × 4 agents × 25 seeds = 500 slots (100 under the race detector).
	good, gc := realCampaign(t, labs[0], "good", 5, 4, gossipSeeds)
	forged, fc := realCampaign(t, stranger, "forged", 2, 2, 2)
	slots := gc.Slots()
	if len(slots) != 5*4*gossipSeeds {
		t.Fatalf("%d slots", len(slots))
	}
	// The hostile node first: its campaign, and claims on the good campaign's first slots.
	mustPublish := func(p *gossipPeer, kind string, b []byte) {
		t.Helper()
		if err := p.ps.Publish(ctx, kind, b); err != nil {
			t.Fatal(err)
		}
	}
	mustPublish(evil, protocol.TopicCampaigns, forged)
	for i, cert := range [][]byte{evil.cert.Raw(), peers[0].cert.Raw()} {
		lab := evil.cert.Lab
		if i == 1 {
			lab = peers[0].cert.Lab
		}
		for j := range 5 {
			b, err := protocol.EncodeClaim(&protocol.ClaimMessage{Kind: protocol.ClaimKindClaim, Campaign: gc.ID, Slot: protocol.SlotID(slots[j]),
				PeerID: evil.id.String(), Lab: lab, Lamport: 1, LeaseMS: time.Hour.Milliseconds(), Attempt: 1, Cert: cert})
			if err != nil {
				t.Fatal(err)
			}
			mustPublish(evil, protocol.TopicClaims, b)
		}
	}
	verdicts := func(key string) (n uint64) {
		for _, p := range peers {
			n += p.ps.Counters().Verdicts[key]
		}
		return n
	}
	// evil (index 12 of 13) has four honest neighbours: 0 and 2 (it dialled), 9 and 11.
	testutil.WaitFor(t, 20*time.Second, "evil's neighbours to reject its campaign and claims", func() bool {
		return verdicts("campaigns/reject/unknown_lab") >= 4 && verdicts("claims/reject/unknown_lab") >= 4*5 &&
			verdicts("claims/reject/cert_not_for_sender") >= 4*5
	})

	start := time.Now()
	mustPublish(peers[1], protocol.TopicCampaigns, good)
	// Every slot finished: a run attestation of it delivered (to some node; each of them
	// also reaches every node unless pubsub lost it, which sync repairs and is reported).
	testutil.WaitFor(t, 240*time.Second, "a run attestation of every slot", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.results) >= len(slots)
	})
	elapsed := time.Since(start)
	everywhere := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		n := 0
		for _, f := range w.byNode {
			if len(f) >= len(slots) {
				n++
			}
		}
		return n
	}
	// Give the last messages time to arrive (a loaded machine queues them for seconds): then
	// what has not arrived is what pubsub lost, and every such loss must be counted (a drop
	// or a refusal, by reason); the loss itself is not an error: sync repairs it.
	attDelivered := func() (delivered, want uint64) {
		w.mu.Lock()
		runs := 0
		for _, n := range w.starts {
			runs += n
		}
		w.mu.Unlock()
		for _, p := range peers {
			delivered += p.ps.Counters().Delivered[protocol.TopicAttestations]
		}
		return delivered, uint64(runs * honest)
	}
	// Every message a validator accepted is delivered to its subscriber unless dropped (and
	// counted): the drivers may lag behind on a loaded machine, so wait for them too.
	acceptedUndelivered := func() (gap uint64) {
		for _, p := range peers {
			c := p.ps.Counters()
			for _, k := range []string{protocol.TopicClaims, protocol.TopicAttestations} {
				acc := c.Verdicts[k+"/accept/"] + c.Verdicts[k+"/accept/ok"]
				gap += acc - min(acc, c.Delivered[k])
			}
		}
		return gap
	}
	settled := func() bool {
		d, w := attDelivered()
		return everywhere() == honest && d >= w && acceptedUndelivered() == 0
	}
	// On a starved machine the drivers drain their queues slowly: keep waiting while
	// deliveries still progress (up to 5 minutes), stop at the first 30 s without progress.
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
		before := acceptedUndelivered()
		if testutil.Poll(30*time.Second, settled) == nil || acceptedUndelivered() >= before {
			break
		}
	}
	attGot, attWant := attDelivered()
	undelivered := acceptedUndelivered()
	// The counters as of now: the shutdown below closes streams with forwarded copies still
	// queued, which are counted as dropped (rightly, but they are no loss of this run).
	final := make([]PubSubCounters, len(peers))
	for i, p := range peers {
		final[i] = p.ps.Counters()
	}
	cancel()
	wg.Wait()
	learned := everywhere()
	var notDone []int
	for _, d := range drivers {
		st, _ := d.m.Status(gc.ID, time.Now())
		notDone = append(notDone, st.Slots-st.Done)
		if st.Failed != 0 {
			t.Errorf("node %d: %d slots failed; the fake executor never fails", d.i, st.Failed)
		}
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.errs {
		t.Error(e)
	}
	for _, s := range slots {
		id := protocol.SlotID(s)
		if w.starts[id] == 0 || !w.results[id] {
			t.Errorf("slot %s: %d runs, result known %v", id, w.starts[id], w.results[id])
		}
	}
	goodIDs := map[string]bool{}
	for _, s := range slots {
		goodIDs[protocol.SlotID(s)] = true
	}
	runs := 0
	for id, n := range w.starts {
		runs += n
		if !goodIDs[id] {
			t.Errorf("a run of slot %s, which is not the good campaign's", id)
		}
	}
	if len(w.campaign[fc.ID]) != 0 {
		t.Errorf("the forged campaign reached the claim machines of nodes %v", w.campaign[fc.ID])
	}
	if len(w.campaign[gc.ID]) != honest {
		t.Errorf("the good campaign reached %d of %d nodes", len(w.campaign[gc.ID]), honest)
	}
	if n := w.heard[evil.id]; n != 0 {
		t.Errorf("%d of the hostile node's claims reached claim machines", n)
	}
	lat := slices.Clone(w.latency)
	slices.Sort(lat)
	pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	var published, delivered, drops, dupMsgs uint64
	for _, c := range final {
		published += c.Published[protocol.TopicClaims]
		delivered += c.Delivered[protocol.TopicClaims]
		drops += c.Drops()
		dupMsgs += c.Duplicates
	}
	if drops != 0 {
		t.Errorf("%d messages dropped for lack of queue room", drops)
	}
	// Every attestation delivery that did not happen is accounted for by a counted loss: a
	// drop anywhere (any reason) or a refusal of an attestation by gossipsub.
	var counted uint64
	lossReasons := map[string]uint64{}
	for _, c := range final {
		for k, v := range c.Dropped {
			counted += v
			lossReasons["dropped/"+k] += v
		}
		for k, v := range c.Refused {
			if kind, _, _ := strings.Cut(k, "/"); kind == protocol.TopicAttestations {
				counted += v
				lossReasons["refused/"+k] += v
			}
		}
	}
	if undelivered > counted {
		t.Errorf("%d accepted claims and attestations never reached a subscriber, only %d losses counted (%v)", undelivered, counted, lossReasons)
	}
	if missing := attWant - min(attGot, attWant); missing > counted {
		t.Errorf("%d of %d run attestation deliveries never arrived, only %d losses counted (%v): a loss no counter sees",
			missing, attWant, counted, lossReasons)
	}
	t.Logf("%d nodes (%d learned every result over pubsub alone), %d slots: all finished in %s; %d runs, %d duplicate runs (%.1f%% of slots); claim→start p50 %s p99 %s (n=%d, settle %s); %d claim messages published (%.1f per slot), %d claim deliveries; aborts %v; %d duplicate gossip copies; 0 drops",
		honest, learned, len(slots), elapsed.Round(time.Millisecond), runs, w.dups, 100*float64(w.dups)/float64(len(slots)),
		pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), len(lat), protocol.DefaultSettle,
		published, float64(published)/float64(len(slots)), delivered, w.aborts, dupMsgs)
	t.Logf("pubsub alone, once deliveries stopped progressing after the last slot finished: run attestations delivered %d of %d (%.1f%%); slots each node does not know finished: %v; claim deliveries %d of %d published×%d (every node delivers its own too)",
		attGot, attWant, 100*float64(attGot)/float64(attWant), notDone, delivered, published, honest)
	t.Logf("losses counted: %d %v", counted, lossReasons)
	t.Logf("verdicts at honest nodes: campaigns/reject/unknown_lab %d, claims/reject/unknown_lab %d, claims/reject/cert_not_for_sender %d",
		verdicts("campaigns/reject/unknown_lab"), verdicts("claims/reject/unknown_lab"), verdicts("claims/reject/cert_not_for_sender"))
}

// realCampaign is a campaign valid now (created a minute ago, open for an hour).
func realCampaign(t testing.TB, lab *attest.Lab, title string, tasks, agents, seeds int) ([]byte, *protocol.Campaign) {
	t.Helper()
	c := &protocol.Campaign{Network: gossipNet, Title: title, Seeds: seeds, Replication: 1,
		Created: time.Now().Add(-time.Minute), Deadline: time.Now().Add(time.Hour)}
	for i := range tasks {
		c.Tasks = append(c.Tasks, agentspec.RawCID(fmt.Appendf(nil, "%s task %d", title, i)))
	}
	for i := range agents {
		spec := &agentspec.Spec{Name: fmt.Sprintf("%s-agent%d", title, i), Version: "1", Command: []string{"evalmesh", "agent", "echo"}}
		c.Agents = append(c.Agents, protocol.NewCampaignAgent(spec))
	}
	env, _, err := protocol.SignCampaign(lab, c)
	if err != nil {
		t.Fatal(err)
	}
	return env, c
}
