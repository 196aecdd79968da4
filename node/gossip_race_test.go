//go:build race

package node

// gossipSeeds is the seeds per (task, agent) of TestClaimsOverRealGossipsub's campaign. Under
// the race detector every signature check runs several times slower, so the campaign is cut
// to 100 slots: the same code paths under the detector, in minutes less.
const gossipSeeds = 5
