// Package examples holds what a newcomer needs to see a real leaderboard with no downloads:
// three small tasks whose data the repository generates deterministically (examples/tasks),
// baseline agents of visibly different skill (examples/agents), and their agent specs.
package examples
