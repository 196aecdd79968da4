//go:build !race

package node

// gossipSeeds is the seeds per (task, agent) of TestClaimsOverRealGossipsub's campaign:
// 5 tasks × 4 agents × 25 seeds = 500 slots.
const gossipSeeds = 25
