// Package api owns the server side of the node's local HTTP API (docs/api.md is the
// contract): every route, its status codes and JSON shapes, and guard, which refuses before
// any route runs every request the owner's CLI would not send (no token, a foreign Host, an
// Origin, a method other than POST, a body of the wrong type or over its bound).
//
// Handler serves the API from a Node (and its Mesh, and TestControls with
// --test-controls): interfaces package node implements, so this package imports no part of
// node and holds no node logic; each route decodes and checks its request, calls one method
// and encodes the answer. The answer types (IDInfo, Event, CampaignReport, ...) live here;
// package node names them under their old names.
//
// Concurrency: the handler is safe for concurrent use and keeps no state of its own beyond
// Options; requests run concurrently on net/http's goroutines and call the Node's methods,
// which must be safe for that. A streamed answer (Event lines) is written by the request's
// goroutine; progress callbacks from other goroutines go through a mutex.
package api
