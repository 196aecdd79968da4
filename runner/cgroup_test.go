package runner

import "testing"

func TestParsePIDsEvents(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
	}{
		{"max 0\n", 0},
		{"max 17\n", 17},
		{"max 17", 17},
		{"", 0},
		{"max\n", 0},
		{"max -3\n", 0},
		{"max x\n", 0},
		{"other 5\nmax 2\n", 2},
		{"max 99999999999999999999\n", 0},
	} {
		if got := ParsePIDsEvents([]byte(tt.in)); got != tt.want {
			t.Errorf("ParsePIDsEvents(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func FuzzParsePIDsEvents(f *testing.F) {
	for _, s := range []string{"max 0\n", "max 17\n", "", "max -1", "max 9223372036854775807\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if n := ParsePIDsEvents(b); n < 0 {
			t.Fatalf("negative count %d from %q", n, b)
		}
	})
}
