package tasks

import (
	"os"
	"testing"
)

// fixtureDir returns dir, or skips when the shared fixtures are not on this machine.
func fixtureDir(t testing.TB, dir string) string {
	t.Helper()
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("fixture %s not available: %v", dir, err)
	}
	return dir
}
