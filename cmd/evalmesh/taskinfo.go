package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// taskFolder is one task folder under a --tasks DIR and what the ledger needs from it.
type taskFolder struct {
	Dir  string
	Info scoring.TaskInfo
	// Bundle is true for an evalmesh bundle (task.yaml), which runs name by its CID; an
	// AIRS-Bench metadata.yaml folder is only ever named by its task name.
	Bundle bool
	// Metric is the metric's name as the metadata spells it (score checks its range).
	Metric string
}

// loadTaskInfos reads every task folder directly under dir (dir itself may be one task).
func loadTaskInfos(dir string) ([]scoring.TaskInfo, error) {
	folders, err := loadTaskFolders(dir)
	if err != nil {
		return nil, err
	}
	infos := make([]scoring.TaskInfo, len(folders))
	for i, f := range folders {
		infos[i] = f.Info
	}
	return infos, nil
}

// loadTaskFolders reads every task folder directly under dir (dir itself may be one task),
// sorted by task name; a name defined twice is an error naming both folders.
func loadTaskFolders(dir string) ([]taskFolder, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading task folders: %w", err)
	}
	var dirs []string
	if isTaskDir(dir) {
		dirs = append(dirs, dir)
	}
	for _, e := range entries {
		if p := filepath.Join(dir, e.Name()); e.IsDir() && isTaskDir(p) {
			dirs = append(dirs, p)
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%s holds no task folder: expected subfolders with metadata.yaml (AIRS-Bench) or task.yaml (evalmesh)", dir)
	}
	seen := map[string]string{}
	var out []taskFolder
	for _, d := range dirs {
		m, err := tasks.LoadMeta(d)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[m.Name]; dup {
			return nil, fmt.Errorf("task %q is defined twice: %s and %s", m.Name, prev, d)
		}
		seen[m.Name] = d
		_, statErr := os.Stat(filepath.Join(d, tasks.MetaFile))
		out = append(out, taskFolder{Dir: d, Bundle: statErr == nil, Metric: m.Metric.Name, Info: scoring.TaskInfo{
			Name:           m.Name,
			LowerIsBetter:  m.Metric.LowerIsBetter,
			Optimum:        m.Metric.OptimalScore,
			SOTA:           m.SOTA.Score,
			EstimatedWorst: m.EstimatedWorstScore,
		}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Info.Name < out[j].Info.Name })
	return out, nil
}

// bundleCIDs maps the root CID of every bundle among folders (what run attestations name
// in their slot) to its task name. Packing only hashes: nothing is stored.
func bundleCIDs(ctx context.Context, folders []taskFolder) (map[string]string, error) {
	m := map[string]string{}
	for _, f := range folders {
		if !f.Bundle {
			continue
		}
		c, err := tasks.Pack(ctx, f.Dir, tasks.NewHashOnlyDAG(), tasks.PackOptions{})
		if err != nil {
			return nil, fmt.Errorf("computing the CID of task bundle %s: %w", f.Dir, err)
		}
		m[c.String()] = f.Info.Name
	}
	return m, nil
}

func isTaskDir(d string) bool {
	for _, f := range []string{"task.yaml", "metadata.yaml"} {
		if _, err := os.Stat(filepath.Join(d, f)); err == nil {
			return true
		}
	}
	return false
}
