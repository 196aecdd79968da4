//go:build !linux

package tasks

// perFileSync: without syncfs(2), each file is fsynced as it is written.
const perFileSync = true

func syncTree(dir string) error { return syncDir(dir) }
