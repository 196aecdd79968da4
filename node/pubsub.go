package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p-pubsub/timecache"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/evalmesh/evalmesh/protocol"
)

// PubSub is the node's gossipsub (docs/protocol.md, "Transport"): one topic per kind under
// /evalmesh/<network>/, every message signed by its author (StrictSign), identified by the
// sha256 of topic and data (protocol.MessageID), and checked by the topic's validator before
// it is delivered or forwarded. It adds no peer discovery: it talks to the peers the host is
// already connected to. Safe for concurrent use.
type PubSub struct {
	ps       *pubsub.PubSub
	self     peer.ID
	network  string
	topics   map[string]*pubsub.Topic // by kind; fixed after NewPubSub
	counters *pubsubCounters
	opts     PubSubOptions
	// published holds the IDs of what we published within gossipsub's seen window: the
	// library would drop a repeat as a duplicate, but only after signing it and a round
	// trip through its event loop, which on a starved node is what kept the claim
	// machine's re-announcements (one per late claim of a finished slot) from ever ending.
	published timecache.TimeCache
}

// PubSubOptions size gossipsub's queues. The library's defaults (32 slots each) are the
// known cause of 10-25 % of messages lost in bursts (docs/protocol.md, "Transport"); the
// defaults here hold a burst of a few thousand messages. Zero fields take the defaults.
type PubSubOptions struct {
	// ValidateQueueSize is the queue in front of the validators (library default 32).
	ValidateQueueSize int
	// PeerOutboundQueueSize is each peer's queue of outgoing RPCs (library default 32).
	PeerOutboundQueueSize int
	// SubscriptionBuffer is each subscription's buffer of delivered messages (library
	// default 32); a subscriber slower than that loses messages (counted).
	SubscriptionBuffer int
	// ValidateThrottle bounds validations running at once across topics (library default 8192).
	ValidateThrottle int
	// Values are validators that hand on the value they verified, by topic kind, in place
	// of validators[kind]: an accepted message reaches subscribers with it (Message.Value).
	Values map[string]ValueValidatorFunc

	// heartbeat, when set, replaces gossipsub's heartbeat interval and its initial delay:
	// tests hold the mesh off with it to see what reaches a peer before the mesh forms.
	heartbeat time.Duration
}

// Default queue sizes.
const (
	DefaultValidateQueueSize     = 8192
	DefaultPeerOutboundQueueSize = 8192
	DefaultSubscriptionBuffer    = 8192
	DefaultValidateThrottle      = 8192
)

func (o PubSubOptions) withDefaults() PubSubOptions {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.ValidateQueueSize, DefaultValidateQueueSize)
	def(&o.PeerOutboundQueueSize, DefaultPeerOutboundQueueSize)
	def(&o.SubscriptionBuffer, DefaultSubscriptionBuffer)
	def(&o.ValidateThrottle, DefaultValidateThrottle)
	return o
}

// Message is a validated message delivered to a subscriber.
type Message struct {
	Kind string
	// ID is protocol.MessageID(topic, Data).
	ID string
	// From is the author (its StrictSign signature checked); ReceivedFrom the neighbour that
	// forwarded it (ourselves for our own messages).
	From         peer.ID
	ReceivedFrom peer.ID
	Data         []byte
	Local        bool // published by this node (ReceivedFrom is this node)
	// Value is what the topic's ValueValidatorFunc verified Data into (kept in gossipsub's
	// ValidatorData between the validator and delivery); nil for other topics.
	Value any
}

// ValueValidatorFunc is protocol.ValueValidatorFunc.
type ValueValidatorFunc = protocol.ValueValidatorFunc

// NewPubSub starts gossipsub on h for network with one validator per topic kind (the keys
// of validators: protocol.TopicCampaigns, ...). Only those kinds can be published or
// subscribed to. The validators run for our own messages too, so Publish of an invalid
// message fails.
func NewPubSub(ctx context.Context, h host.Host, network string, validators map[string]protocol.ValidatorFunc, opts PubSubOptions) (*PubSub, error) {
	if !protocol.ValidNetworkName(network) {
		return nil, fmt.Errorf("network name %q must be 1-64 lower-case letters, digits, '.', '_' or '-' (config `network:`)", network)
	}
	if len(validators)+len(opts.Values) == 0 {
		return nil, errors.New("pubsub needs at least one topic validator")
	}
	opts = opts.withDefaults()
	c := newPubsubCounters(network)
	params := pubsub.DefaultGossipSubParams()
	if opts.heartbeat > 0 {
		params.HeartbeatInterval, params.HeartbeatInitialDelay = opts.heartbeat, opts.heartbeat
	}
	ps, err := pubsub.NewGossipSub(ctx, h,
		pubsub.WithGossipSubParams(params),
		// Our own messages go to every connected peer on the topic, not only to the mesh.
		// The library's default (off in v0.19) sends them to the mesh alone, and a peer
		// that subscribed since the last heartbeat is in no mesh yet: what a node published
		// in that second never reached it, only the next sync session did (the network
		// demo's campaigns, published right after its nodes connect, reached the other
		// nodes 3 s late in most runs). The spec's flood publishing (gossipsub v1.1) costs
		// one copy per peer per message we author, which a network of labs can afford.
		pubsub.WithFloodPublish(true),
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		pubsub.WithMessageIdFn(func(m *pb.Message) string { return protocol.MessageID(m.GetTopic(), m.GetData()) }),
		pubsub.WithMaxMessageSize(protocol.MaxMessageSize+16<<10), // room for the RPC envelope and signature
		pubsub.WithValidateQueueSize(opts.ValidateQueueSize),
		pubsub.WithPeerOutboundQueueSize(opts.PeerOutboundQueueSize),
		pubsub.WithValidateThrottle(opts.ValidateThrottle),
		pubsub.WithRawTracer(c),
	)
	if err != nil {
		return nil, fmt.Errorf("start gossipsub: %w", err)
	}
	p := &PubSub{ps: ps, self: h.ID(), network: network, topics: map[string]*pubsub.Topic{}, counters: c, opts: opts,
		published: timecache.NewTimeCache(pubsub.TimeCacheDuration)}
	all := map[string]ValueValidatorFunc{}
	for kind, f := range validators {
		if f == nil {
			return nil, fmt.Errorf("topic %s has a nil validator", kind)
		}
		all[kind] = func(from peer.ID, data []byte) (protocol.Validation, any) { return f(from, data), nil }
	}
	for kind, f := range opts.Values {
		if f == nil {
			return nil, fmt.Errorf("topic %s has a nil validator", kind)
		}
		all[kind] = f
	}
	for kind, f := range all {
		if protocol.MaxTopicMessageSize(kind) == 0 {
			return nil, fmt.Errorf("unknown topic kind %q (want campaigns, claims, attestations or heads)", kind)
		}
		topic := protocol.Topic(network, kind)
		if err := ps.RegisterTopicValidator(topic, p.validator(kind, f)); err != nil {
			return nil, fmt.Errorf("register validator for %s: %w", topic, err)
		}
		t, err := ps.Join(topic)
		if err != nil {
			return nil, fmt.Errorf("join %s: %w", topic, err)
		}
		p.topics[kind] = t
	}
	return p, nil
}

// validator adapts a protocol validator: the size limit first, a panic is a Reject (hostile
// input must not take the node down), every verdict counted by kind and reason.
func (p *PubSub) validator(kind string, f ValueValidatorFunc) pubsub.ValidatorEx {
	limit := protocol.MaxTopicMessageSize(kind)
	return func(_ context.Context, _ peer.ID, m *pubsub.Message) (res pubsub.ValidationResult) {
		var v protocol.Validation
		defer func() {
			if r := recover(); r != nil {
				v = protocol.Validation{Verdict: protocol.Reject, Reason: "validator_panic"}
			}
			p.counters.verdict(kind, v)
			switch v.Verdict {
			case protocol.Accept:
				res = pubsub.ValidationAccept
			case protocol.Ignore:
				res = pubsub.ValidationIgnore
			default:
				res = pubsub.ValidationReject
			}
		}()
		if len(m.Data) > limit {
			v = protocol.Validation{Verdict: protocol.Reject, Reason: protocol.ReasonTooLarge}
			return
		}
		var value any
		v, value = f(m.GetFrom(), m.Data)
		if v.Verdict == protocol.Accept {
			m.ValidatorData = value // gossipsub delivers it with the message
		}
		return
	}
}

// Publish signs and sends data on the topic of kind. It fails if our own validator refuses
// it. Publishing bytes already seen within the seen-messages window (2 minutes) is a no-op:
// the message ID is the content. Bytes this node published within that window return at
// once, without signing them again or asking the router (counted as "republish_skipped").
func (p *PubSub) Publish(ctx context.Context, kind string, data []byte) error {
	t, ok := p.topics[kind]
	if !ok {
		return fmt.Errorf("no topic %q on this node", kind)
	}
	id := protocol.MessageID(t.String(), data)
	if p.published.Has(id) {
		p.counters.mu.Lock()
		p.counters.c.RepublishSkipped++
		p.counters.mu.Unlock()
		return nil
	}
	if err := t.Publish(ctx, data); err != nil {
		return fmt.Errorf("publish on %s: %w", protocol.Topic(p.network, kind), err)
	}
	p.published.Add(id)
	p.counters.published(kind)
	return nil
}

// Subscribe delivers the validated messages of kind, ours included, until ctx ends or
// cancel is called; the channel is then closed. A subscriber that falls behind by more than
// PubSubOptions.SubscriptionBuffer messages loses messages, counted as
// "subscriber_too_slow".
func (p *PubSub) Subscribe(ctx context.Context, kind string) (msgs <-chan Message, cancel func(), err error) {
	return subscribeAs(p, ctx, kind, func(m Message) Message { return m })
}

// subscribeAs is Subscribe delivering each message as conv makes it (the mesh reads its
// own message type: no second goroutine to convert them).
func subscribeAs[T any](p *PubSub, ctx context.Context, kind string, conv func(Message) T) (msgs <-chan T, cancel func(), err error) {
	t, ok := p.topics[kind]
	if !ok {
		return nil, nil, fmt.Errorf("no topic %q on this node", kind)
	}
	sub, err := t.Subscribe(pubsub.WithBufferSize(p.opts.SubscriptionBuffer))
	if err != nil {
		return nil, nil, fmt.Errorf("subscribe to %s: %w", protocol.Topic(p.network, kind), err)
	}
	ctx, stop := context.WithCancel(ctx)
	out := make(chan T)
	go func() {
		defer close(out)
		defer sub.Cancel()
		for {
			m, err := sub.Next(ctx)
			if err != nil {
				return
			}
			// pubsub's Message.Local means "not sent to the network"; ours means "ours".
			msg := Message{Kind: kind, ID: m.ID, From: m.GetFrom(), ReceivedFrom: m.ReceivedFrom, Data: m.Data, Local: m.ReceivedFrom == p.self, Value: m.ValidatorData}
			select {
			case out <- conv(msg):
				p.counters.delivered(kind)
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, stop, nil
}

// Peers lists the peers subscribed to kind that we are connected to.
func (p *PubSub) Peers(kind string) []peer.ID {
	t, ok := p.topics[kind]
	if !ok {
		return nil
	}
	return t.ListPeers()
}

// MeshPeers lists our gossipsub mesh peers on kind: the peers we forward its messages to.
// It fills at the router's heartbeat (every second) after peers subscribe.
func (p *PubSub) MeshPeers(kind string) []peer.ID {
	return p.counters.meshPeers(protocol.Topic(p.network, kind))
}

// CountDrop counts a message the node itself dropped before Publish (a full queue of its
// own), under reason, so Counters().Dropped accounts for every loss, ours and the library's.
func (p *PubSub) CountDrop(reason string) { p.counters.add(p.counters.c.Dropped, reason) }

// Counters returns a snapshot of what was published, delivered, refused and dropped.
func (p *PubSub) Counters() PubSubCounters { return p.counters.snapshot() }

// Close leaves every topic; the gossipsub router stops with the context NewPubSub got.
func (p *PubSub) Close() error {
	var errs []error
	for _, t := range p.topics {
		errs = append(errs, t.Close())
	}
	p.published.Done()
	return errors.Join(errs...)
}

// PubSubCounters is a snapshot of a PubSub's counts. Maps are never nil.
type PubSubCounters struct {
	// Published and Delivered count by topic kind: messages we published, and validated
	// messages handed to our subscribers.
	Published map[string]uint64 `json:"published"`
	Delivered map[string]uint64 `json:"delivered"`
	// Verdicts counts our validators' answers, keyed "kind/verdict/reason"
	// (e.g. "campaigns/reject/unknown_lab").
	Verdicts map[string]uint64 `json:"verdicts"`
	// Refused counts messages gossipsub refused, by its reason ("invalid signature",
	// "validation failed", "validation ignored", "self originated message", ...), by kind.
	Refused map[string]uint64 `json:"refused"`
	// Dropped counts messages lost for lack of room, by reason: "validation_queue_full",
	// "validation_throttled", "outbound_queue_full" (messages in RPCs a peer's queue had no
	// room for), "outbound_control_dropped" (control-only RPCs, repeated by the library),
	// "outbound_stream_closed" (messages queued to a peer whose stream then closed),
	// "peer_throttled", "subscriber_too_slow", and the node's own queues in front of
	// Publish (CountDrop: "claim_queue_full").
	Dropped map[string]uint64 `json:"dropped"`
	// Duplicates counts messages received again after their first copy (not a loss).
	Duplicates uint64 `json:"duplicates"`
	// RepublishSkipped counts Publish calls of bytes this node published within the seen
	// window, answered at once (the library would drop them as duplicates; not a loss).
	RepublishSkipped uint64 `json:"republish_skipped"`
}

// Drops is the total of Dropped.
func (c PubSubCounters) Drops() uint64 {
	var n uint64
	for _, v := range c.Dropped {
		n += v
	}
	return n
}

// pubsubCounters is the RawTracer that counts; gossipsub calls it from its event loop and
// from validation goroutines, so it locks.
type pubsubCounters struct {
	prefix string // "/evalmesh/<network>/"
	mu     sync.Mutex
	c      PubSubCounters
	mesh   map[string]map[peer.ID]bool // topic → our mesh peers
	// queued counts, per peer, the messages in RPCs handed to its outbound queue and not
	// yet written: when the stream closes (a write past its 30 s deadline on a starved
	// peer, a reset) the library discards its queue without a trace of its own.
	// The writer goroutine may trace a completion before the event loop traces the send,
	// so the count may dip below zero for a moment.
	queued map[peer.ID]int64
}

func newPubsubCounters(network string) *pubsubCounters {
	return &pubsubCounters{prefix: protocol.Topic(network, ""), mesh: map[string]map[peer.ID]bool{}, queued: map[peer.ID]int64{}, c: PubSubCounters{
		Published: map[string]uint64{}, Delivered: map[string]uint64{}, Verdicts: map[string]uint64{},
		Refused: map[string]uint64{}, Dropped: map[string]uint64{},
	}}
}

func (c *pubsubCounters) add(m map[string]uint64, k string) {
	c.mu.Lock()
	m[k]++
	c.mu.Unlock()
}

func (c *pubsubCounters) published(kind string) { c.add(c.c.Published, kind) }
func (c *pubsubCounters) delivered(kind string) { c.add(c.c.Delivered, kind) }
func (c *pubsubCounters) verdict(kind string, v protocol.Validation) {
	c.add(c.c.Verdicts, kind+"/"+v.Verdict.String()+"/"+v.Reason)
}

func (c *pubsubCounters) kindOf(m *pubsub.Message) string {
	t := m.GetTopic()
	if len(t) > len(c.prefix) && t[:len(c.prefix)] == c.prefix {
		return t[len(c.prefix):]
	}
	return t
}

func (c *pubsubCounters) snapshot() PubSubCounters {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.c
	s.Published, s.Delivered, s.Verdicts = maps.Clone(s.Published), maps.Clone(s.Delivered), maps.Clone(s.Verdicts)
	s.Refused, s.Dropped = maps.Clone(s.Refused), maps.Clone(s.Dropped)
	return s
}

// RawTracer: the drops and refusals; the rest are no-ops.
var _ pubsub.RawTracer = (*pubsubCounters)(nil)

func (c *pubsubCounters) RejectMessage(m *pubsub.Message, reason string) {
	switch reason {
	case pubsub.RejectValidationQueueFull:
		c.add(c.c.Dropped, "validation_queue_full")
	case pubsub.RejectValidationThrottled:
		c.add(c.c.Dropped, "validation_throttled")
	default:
		c.add(c.c.Refused, c.kindOf(m)+"/"+reason)
	}
}

// DropRPC: an RPC to a peer found its queue full (or the peer gone). Each message in it is
// a loss to that peer; an RPC of control only (graft, prune, gossip) is counted apart,
// since the library queues grafts and prunes again and gossip repeats every heartbeat.
func (c *pubsubCounters) DropRPC(rpc *pubsub.RPC, _ peer.ID) {
	n := uint64(len(rpc.GetPublish()))
	c.mu.Lock()
	if n == 0 {
		c.c.Dropped["outbound_control_dropped"]++
	} else {
		c.c.Dropped["outbound_queue_full"] += n
	}
	c.mu.Unlock()
}

func (c *pubsubCounters) UndeliverableMessage(*pubsub.Message) {
	c.add(c.c.Dropped, "subscriber_too_slow")
}

// ThrottlePeer: the router accepted only control from a peer, so the messages in its RPC
// were not read (the peer gater; not configured today, counted should it ever be).
func (c *pubsubCounters) ThrottlePeer(peer.ID) { c.add(c.c.Dropped, "peer_throttled") }

// The mesh, from Graft and Prune, so tests and status can tell when a topic's mesh has
// formed: until the first heartbeat after peers subscribe, a message goes one hop only.
func (c *pubsubCounters) Graft(p peer.ID, topic string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mesh[topic] == nil {
		c.mesh[topic] = map[peer.ID]bool{}
	}
	c.mesh[topic][p] = true
}

func (c *pubsubCounters) Prune(p peer.ID, topic string) {
	c.mu.Lock()
	delete(c.mesh[topic], p)
	c.mu.Unlock()
}

func (c *pubsubCounters) OnClosedOutboundStream(p peer.ID) {
	c.mu.Lock()
	for _, m := range c.mesh {
		delete(m, p)
	}
	if n := c.queued[p]; n > 0 {
		c.c.Dropped["outbound_stream_closed"] += uint64(n)
	}
	delete(c.queued, p)
	c.mu.Unlock()
}

func (c *pubsubCounters) SendRPC(rpc *pubsub.RPC, p peer.ID) {
	if n := int64(len(rpc.GetPublish())); n > 0 {
		c.mu.Lock()
		c.queued[p] += n
		c.mu.Unlock()
	}
}

func (c *pubsubCounters) SendRPCCompleted(rpc *pubsub.RPC, p peer.ID, _ time.Duration) {
	if n := int64(len(rpc.GetPublish())); n > 0 {
		c.mu.Lock()
		c.queued[p] -= n
		c.mu.Unlock()
	}
}

func (c *pubsubCounters) meshPeers(topic string) []peer.ID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(c.mesh[topic]))
}

func (c *pubsubCounters) DuplicateMessage(*pubsub.Message) {
	c.mu.Lock()
	c.c.Duplicates++
	c.mu.Unlock()
}
func (c *pubsubCounters) OnNewOutboundStream(peer.ID, libp2pproto.ID) {}
func (c *pubsubCounters) Join(string)                                 {}
func (c *pubsubCounters) Leave(string)                                {}
func (c *pubsubCounters) ValidateMessage(*pubsub.Message)             {}
func (c *pubsubCounters) DeliverMessage(*pubsub.Message)              {}
func (c *pubsubCounters) RecvRPC(*pubsub.RPC)                         {}
