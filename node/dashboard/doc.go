// Package dashboard owns the read-only web dashboard a daemon serves on its own listen
// address (node.Options.DashboardListen, `evalmesh daemon --dashboard-listen`): server-rendered
// pages (html/template, embedded, no JavaScript, no CDN) with SVG charts, the same data as
// JSON under /api/v1/, the leaderboard as CSV and as the canonical ledger JSON, and
// Prometheus /metrics. docs/api.md is the contract: what an exposed dashboard reveals and
// what a visitor can make it do.
//
// It holds no node state: a Source (the node) hands it a Snapshot, an immutable value the
// pages are rendered from. Every view (leaderboard rows, heatmap, agent and task pages) is a
// pure function of a Snapshot, so tests and benchmarks build Snapshots directly.
//
// Concurrency: a Handler is safe for concurrent use. It keeps the last Snapshot for
// Options.MaxAge (one request in flight refreshes it; the others read the old one), so a burst
// of visitors costs the node one snapshot, and limits each client address's request rate.
// Snapshots are never mutated after Source returns them.
package dashboard
