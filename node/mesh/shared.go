package mesh

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
)

// shared is what the mesh and each of its duties (ledgerCalc, objects, grantIndex,
// auditor, docVote, recordSigner, rescorer, capacity, certWatch, revocationPoller) read.
// Start sets every field and nothing writes one after; wg counts the goroutines of all of
// them (any goroutine adds, Close waits). coord is the pointer only: the Coordinator
// belongs to the loop goroutine and is touched only in a closure run there (do, query,
// decide), as is apply (Mesh.apply).
type shared struct {
	opts   Options
	node   Node
	store  *vstore.Store
	ps     Gossip
	lab    string // this node's lab (its certificate's)
	self   string // this node's peer ID
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	events chan func() // the loop's queue of closures
	coord  *protocol.Coordinator
	apply  func(protocol.CoordActions)
}

// coordCall is a call of the coordinator, made on the loop at now; the loop carries out
// the actions it returns.
type coordCall func(c *protocol.Coordinator, now time.Time) protocol.CoordActions

// do hands f to the loop; false when the mesh has stopped.
func (s *shared) do(f func()) bool {
	select {
	case s.events <- f:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// query runs f on the loop and waits for it.
func (s *shared) query(ctx context.Context, f func()) error {
	done := make(chan struct{})
	if !s.do(func() { f(); close(done) }) {
		return errors.New("mesh stopped")
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// decide hands the loop a coordinator call and has it carry out the actions; false when
// the mesh has stopped.
func (s *shared) decide(f coordCall) bool {
	return s.do(func() { s.apply(f(s.coord, s.opts.Now())) })
}

func (s *shared) gossip(kind string, data []byte) {
	go func() {
		if err := s.ps.Publish(s.ctx, kind, data); err != nil && s.ctx.Err() == nil {
			s.opts.Logf("mesh: publish on %s: %v", kind, err)
		}
	}()
}

// announceHead publishes this node's head on /heads (Node.SignedHead: the root is the one
// this mesh last computed, for the set it computed it over).
func (s *shared) announceHead() {
	data, err := s.node.SignedHead(s.lab)
	if err != nil {
		s.opts.Logf("mesh: sign head: %v", err)
		return
	}
	s.gossip(protocol.TopicHeads, data)
}
