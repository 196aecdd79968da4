package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/gpu"
	"github.com/evalmesh/evalmesh/runner/slurm"
)

func init() { register(newGPUsCmd) }

func newGPUsCmd(g *globals) *cobra.Command {
	var energy time.Duration
	cmd := &cobra.Command{
		Use:   "gpus",
		Short: "List the GPUs NVML reports (index, UUID, name, memory, driver), or the Slurm partition's",
		Long: `List the NVIDIA GPUs this node can give to runs, as NVML reports them. Without the NVML
library (no NVIDIA driver) the node runs CPU-only and this says so. On a node whose
runner.executor is slurm, list the GPUs of its partition (runner.slurm.partition) on the nodes
that can take jobs, one row each, named slurm:NODE/gpuN.

Examples:
  evalmesh gpus
  evalmesh gpus --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var inv gpu.Inventory
			if part, err := slurmPartition(g); err != nil {
				return err
			} else if part != nil && energy == 0 {
				// A Slurm node: the partition's GPUs are the ones runs get.
				if inv, err = part.GPUSource().Inventory(); err != nil {
					return err
				}
			} else {
				// No log writer: without NVML the inventory below says CPU-only, once.
				src, err := gpu.System(nil)
				if err != nil {
					return err
				}
				if energy > 0 {
					return energySample(cmd, g, src, energy)
				}
				if inv, err = src.Inventory(); err != nil {
					return err
				}
			}
			// Which unfinished run of this home holds each GPU (none when no home exists).
			held := map[string]string{}
			if h, err := g.Home(); err == nil {
				held, _ = runner.GPUHolders(h)
			}
			out := gpusOutput{Inventory: inv, GPUs: make([]gpuRow, len(inv.GPUs))}
			for i, d := range inv.GPUs {
				out.GPUs[i] = gpuRow{Info: d, HeldBy: held[d.UUID]}
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), out)
			}
			w := cmd.OutOrStdout()
			if inv.CPUOnly {
				fmt.Fprintf(w, "no GPUs: %s (runs are CPU-only)\n", inv.Reason)
				return nil
			}
			if inv.NVMLVersion == "" {
				fmt.Fprintf(w, "%s: %d GPU(s); Slurm picks which a job gets\n", inv.Driver, len(inv.GPUs))
			} else {
				fmt.Fprintf(w, "driver %s, NVML %s, CUDA driver %d\n", inv.Driver, inv.NVMLVersion, inv.CUDAVersion)
			}
			fmt.Fprintf(w, "%-5s %-42s %-28s %-10s %s\n", "INDEX", "UUID", "NAME", "MEMORY", "HELD BY RUN")
			for _, d := range out.GPUs {
				holder := d.HeldBy
				if holder == "" {
					holder = "-"
				}
				fmt.Fprintf(w, "%-5d %-42s %-28s %-10s %s\n", d.Index, d.UUID, d.Name, fmt.Sprintf("%.1f GiB", float64(d.MemoryBytes)/(1<<30)), holder)
			}
			return nil
		},
	}
	// Hidden: read every GPU's energy counter twice, DURATION apart (bench/gpu-check.sh).
	cmd.Flags().DurationVar(&energy, "energy-sample", 0, "read each GPU's energy counter twice, this far apart, and print the delta")
	_ = cmd.Flags().MarkHidden("energy-sample")
	return cmd
}

// gpusOutput is the inventory with, per GPU, the unfinished run that holds it.
type gpusOutput struct {
	gpu.Inventory
	GPUs []gpuRow `json:"gpus"`
}

type gpuRow struct {
	gpu.Info
	HeldBy string `json:"held_by,omitempty"`
}

type energyReading struct {
	UUID        string  `json:"uuid"`
	FirstMJ     uint64  `json:"first_mj"`
	SecondMJ    uint64  `json:"second_mj"`
	DeltaJoules float64 `json:"delta_joules"`
	Watts       float64 `json:"mean_watts"`
	UtilPercent uint32  `json:"util_percent"`
	Error       string  `json:"error,omitempty"`
}

func energySample(cmd *cobra.Command, g *globals, src *gpu.NVML, d time.Duration) error {
	inv, err := src.Inventory()
	if err != nil {
		return err
	}
	if inv.CPUOnly {
		return &exitError{code: 3, msg: "evalmesh gpus --energy-sample: no GPUs (" + inv.Reason + ")"}
	}
	out := make([]energyReading, len(inv.GPUs))
	for i, info := range inv.GPUs {
		out[i].UUID = info.UUID
		if out[i].FirstMJ, err = src.EnergyMilliJoules(info.UUID); err != nil {
			out[i].Error = err.Error()
		}
	}
	time.Sleep(d) // the point of the command is to wait between two counter reads
	for i := range out {
		if out[i].Error != "" {
			continue
		}
		if out[i].SecondMJ, err = src.EnergyMilliJoules(out[i].UUID); err != nil {
			out[i].Error = err.Error()
			continue
		}
		if out[i].SecondMJ >= out[i].FirstMJ {
			out[i].DeltaJoules = float64(out[i].SecondMJ-out[i].FirstMJ) / 1000
		}
		out[i].Watts = out[i].DeltaJoules / d.Seconds()
		if s, err := src.Sample(out[i].UUID); err == nil {
			out[i].UtilPercent = s.GPUPercent
		}
	}
	if g.jsonOut {
		return printJSON(cmd.OutOrStdout(), out)
	}
	for _, r := range out {
		if r.Error != "" {
			fmt.Fprintf(cmd.OutOrStdout(), "%s  error: %s\n", r.UUID, r.Error)
			continue
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s  %d mJ -> %d mJ  %.3f J in %v (%.1f W, util %d%%)\n", r.UUID, r.FirstMJ, r.SecondMJ, r.DeltaJoules, d, r.Watts, r.UtilPercent)
	}
	return nil
}

// slurmPartition is the slurm executor of a home whose runner.executor is slurm; nil
// elsewhere (no home, another executor).
func slurmPartition(g *globals) (*slurm.Executor, error) {
	h, err := g.Home()
	if err != nil {
		return nil, nil
	}
	cfg, err := h.Config()
	if err != nil || cfg.Runner.Executor != slurm.DriverName {
		return nil, err
	}
	return slurm.New(slurm.FromConfig(cfg.Runner.Slurm))
}
