// Package scoring owns the numbers of the leaderboard: the AIRS-Bench and HeurekaBench
// metrics computed from a submission and its labels, the normalized score (march of nines),
// the valid-submission rate, the Bradley–Terry Elo fit with bootstrap confidence intervals,
// and the ledger function that turns a set of results into canonical bytes and a root hash.
//
// Everything here is pure: values in, values out, no I/O, no wall clock, no map iteration
// order or goroutine scheduling reaching an output. Functions are safe for concurrent use.
package scoring
