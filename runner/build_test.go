package runner

import "testing"

// The revision `make build` passes in is the one Build reports (a test binary carries no
// vcs.revision of its own); a stamped vcs.revision would take its place.
func TestBuildReportsPassedInRevision(t *testing.T) {
	defer func(r, m string) { buildRevision, buildModified = r, m }(buildRevision, buildModified)
	buildRevision, buildModified = "0123456789abcdef0123456789abcdef01234567", "true"
	b := Build()
	if b.Module != ModulePath || b.Version == "" || b.Revision != buildRevision || !b.Modified {
		t.Fatalf("Build() = %+v", b)
	}
}
