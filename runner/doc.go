// Package runner owns the execution of one run: GPU inventory through NVML, the executors
// (docker for production, process for development), resource and wall-clock limits, log
// capture, evaluation in isolation from the agent, telemetry, and the signed run attestation.
//
// It never decides what to run; the caller hands it a bundle, an agent spec and a seed.
package runner
