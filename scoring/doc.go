// Package scoring owns the numbers of the leaderboard: the AIRS-Bench and HeurekaBench
// metrics computed from a submission and its labels, the normalized score (march of nines),
// the valid-submission rate, the Bradley–Terry Elo fit with bootstrap confidence intervals,
// and the ledger function that turns a set of results into canonical bytes and a root hash.
//
// Everything here is pure: values in, values out, no I/O, no wall clock, no map iteration
// order or goroutine scheduling reaching an output. Functions are safe for concurrent use.
//
// Entry points:
//   - ScoreCSV: one submission against its labels with a named metric (LookupMetric lists
//     direction, optimum and re-score tolerance). A malformed submission is an
//     *InvalidSubmission naming the row and column — an invalid run, never a score.
//     CSVSpec.Task (the AIRS-Bench task name) turns on the answer rules a few upstream
//     evaluators have of their own (taskRules in csv_tasks.go, by task name; DuoRC is
//     recognised by its has_answer,answer columns); callers should set it. csv.go
//     dispatches, csv_table.go reads cells, csv_scorers.go holds the generic rules.
//   - ParseResultsJSONL: a results file (one JSON object a line) into []Result.
//   - ComputeLedger: results + task metadata + policy → *Ledger; Canonical() is its
//     canonical JSON (floats at 9 significant digits) and Root() that JSON's sha256.
//   - ImpactWeight, RankMargins, RankMovers, MoverLambda, PairCleared (impact.go): the
//     audit impact rule, which results would move an agent's rank and are held until
//     audited; one definition for the ledger (attest), the coordinator (protocol) and the
//     audit simulator (protocol/auditsim).
//
// How the ledger stays deterministic: results are sorted by (task, agent, seed) before
// use and hashed (every field, scores as exact IEEE-754 bits) into inputs_digest, which is
// in the canonical JSON — so any change of any input changes the root — and which seeds
// the bootstrap: round r of the Elo bootstrap and agent a's normalized-score bootstrap
// draw from ChaCha8 streams keyed by sha256(digest, purpose, r or a), so work can be split
// across cores without changing a single draw. Integer game counts are summed across
// goroutines; floating sums are done in a fixed order.
//
// Elo follows AIRS-Bench (docs/scoring.md): every seed-vs-seed game per task between every
// pair of players, the sota player holding 10 runs at the task's SOTA; a win weighs 2 and
// a tie 1 each way; maximum-likelihood Bradley–Terry at 400 points per factor 10, mean
// 1000. Games are aggregated into per-pair win/tie counts (counted by two pointers over
// sorted scores), never enumerated, and the bootstrap resamples those counts as a
// multinomial, which is the same distribution as resampling upstream's battle table (every
// game and its swapped copy: 2N rows). That is the default Elo bootstrap; a network may
// choose Options.EloBootstrap = EloBootstrapTasksLinearised instead (elo_tasks.go): the
// tasks resampled and one linear step from the MLE per round (an estimating-function
// bootstrap), whose intervals mean variation across tasks, not games, and which costs T
// linear solves instead of a resample and refit per round (docs/scoring.md §4, §7).
//
// When the maximum-likelihood ratings do not exist — Ford's condition fails: some group of
// players never won or tied against the rest, e.g. an agent that beats every run, or one
// whose runs are all invalid where no other run on its tasks is — the fit is regularised:
// one pseudo-tie (PseudoTie) is added to every pair, which keeps each gap between
// consecutive ratings within 400·log10(4G+2) Elo (G the most games any pair played). It is
// applied only then, so a well-posed leaderboard is the pure AIRS-Bench MLE; the ledger
// says which in "elo_fit" ("mle" or "regularised") and counts the bootstrap resamples that
// needed it in "elo_bootstrap_regularised". The fit never fails: Newton first, Hunter's
// MM if Newton's Hessian is numerically singular.
//
// Cross-architecture: the ledger is bit-identical on every architecture, not just after
// the 9-digit rounding. Go may fuse x*y+z into one FMA on arm64, ppc64le, s390x, riscv64
// and loong64 and package math's Exp/Log are assembly on some of them, so the numeric
// path uses portable dlog/dexp/dlog1p and its own Cholesky (detmath.go) and wraps every
// product that feeds a sum in float64(), which the spec says blocks fusion. Keep it so:
// bench/crossarch.sh checks the compiler output has no fused multiply-add and runs the
// golden-root tests under qemu for arm64, ppc64le and s390x.
package scoring
