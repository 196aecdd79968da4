package scoring

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// rawDigests hashes the exact IEEE-754 bits of the ledger's intermediate numbers — before
// the 9-digit rounding, which hides most last-bit differences but not all: a value near a
// rounding boundary, a tie verdict, or a binomial draw decided by a last bit changes the
// root. Each entry is one stage, so a mismatch names where architectures diverge.
func rawDigests() []string {
	type stage struct {
		name string
		h    func(put func(float64))
	}
	rs, ti := goldenResults()
	sorted := make([]Result, len(rs))
	copy(sorted, rs)
	l, _ := ComputeLedger(rs, ti, Options{}) // warms nothing; keeps the input path honest
	_ = l
	// Games of the golden input, counted as ComputeLedger does.
	agentIdx := map[string]int{}
	for _, r := range rs {
		agentIdx[r.Agent] = 0
	}
	names := sortedKeys(agentIdx)
	for i, n := range names {
		agentIdx[n] = i
	}
	P := len(names) + 1
	g := NewGames(P)
	for i := range ti {
		var task []Result
		for _, r := range rs {
			if r.Task == ti[i].Name {
				task = append(task, r)
			}
		}
		sortResults(task)
		addTaskGames(g, taskRuns(task, &ti[i], agentIdx, P))
	}
	theta, _ := fitGames(g, nil)
	var seed [32]byte
	stages := []stage{
		{"phi", func(put func(float64)) {
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 20000; i++ {
				s := float64(rng.Float64()*4) - 2
				put(Phi(s, false))
				put(Phi(s*1e6, true))
				put(NormalizedScore(s, 0.8, -0.5, false, true))
			}
		}},
		{"exp-log", func(put func(float64)) {
			rng := rand.New(rand.NewPCG(3, 4))
			for i := 0; i < 20000; i++ {
				x := float64(rng.Float64()*80) - 40 // float64(): the inputs must not be fused either
				put(sigmoid(x))
				put(logSigmoid(x))
			}
		}},
		{"tie", func(put func(float64)) {
			rng := rand.New(rand.NewPCG(5, 6))
			for i := 0; i < 20000; i++ {
				a := float64(rng.Float64() * 10)
				b := a + float64((rng.Float64()-0.5)*(2e-6+float64(2e-5*a)))
				if Tie(a, b) {
					put(1)
				} else {
					put(0)
				}
			}
		}},
		{"newton", func(put func(float64)) {
			for _, v := range theta {
				put(v)
			}
			th, _ := FitNewton(weights(g, PseudoTie), P, nil)
			for _, v := range th {
				put(v)
			}
		}},
		{"mm", func(put func(float64)) {
			for _, v := range fitMM(weights(g, PseudoTie), P, nil, 2000) {
				put(v)
			}
		}},
		{"binomial", func(put func(float64)) {
			src := rand.NewChaCha8(seed)
			rng := rand.New(src) // the same stream: rand.Rand holds no state of its own
			for i := 0; i < 20000; i++ {
				n := int64(1 + rng.IntN(1_000_000))
				p := rng.Float64()
				put(float64(binomial(src, n, p)))
			}
		}},
		{"bootstrap-elo", func(put func(float64)) {
			out, _ := bootstrapElo(g, theta, 20, seed)
			for _, r := range out {
				for _, v := range r {
					put(v)
				}
			}
		}},
		{"bootstrap-means", func(put func(float64)) {
			vals := make([][]float64, 30)
			rng := rand.New(rand.NewPCG(7, 8))
			for a := range vals {
				for k := 0; k < 200; k++ {
					vals[a] = append(vals[a], float64(rng.Float64()*3))
				}
			}
			strata := make([][]int, len(vals))
			for a := range strata {
				strata[a] = []int{0, 50, 120}
			}
			for _, ci := range bootstrapMeans(vals, strata, 100, seed) {
				put(ci[0])
				put(ci[1])
			}
		}},
		{"quantile", func(put func(float64)) {
			v := []float64{0.1, 0.7, 1.3, 2.9, 1000.123456789, 1e6 / 3}
			for q := 0.0; q <= 1; q += 0.01 {
				put(quantile(v, q))
			}
		}},
	}
	var out []string
	for _, s := range stages {
		h := sha256.New()
		var b [8]byte
		s.h(func(v float64) {
			binary.BigEndian.PutUint64(b[:], math.Float64bits(v))
			h.Write(b[:])
		})
		out = append(out, fmt.Sprintf("%s %s", s.name, hex.EncodeToString(h.Sum(nil))[:16]))
	}
	return out
}

func sortResults(rs []Result) {
	// by agent, then seed (one task): the order taskRuns expects.
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && (rs[j].Agent < rs[j-1].Agent || rs[j].Agent == rs[j-1].Agent && rs[j].Seed < rs[j-1].Seed); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// TestRawNumericGolden pins those stage digests (testdata/golden_raw.txt; regenerate with
// -update-golden). The 9-digit rounding makes the roots agree across architectures most
// of the time even with fused or assembly arithmetic; these digests do not forgive a bit.
func TestRawNumericGolden(t *testing.T) {
	got := rawDigests()
	for _, s := range got {
		fmt.Fprintf(os.Stderr, "%s %s\n", archName(), s)
	}
	text := strings.Join(got, "\n") + "\n"
	const path = "testdata/golden_raw.txt"
	if *updateGolden {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with go test -run RawNumeric -update-golden)", err)
	}
	if text != string(want) {
		t.Fatalf("intermediate bits differ from %s (%s):\ngot:\n%swant:\n%s", path, archName(), text, want)
	}
}

// TestTieBoundaryNotFused checks Tie on score pairs whose distance equals the rounded
// threshold 1e-6 + 1e-5·max(|a|,|b|) but exceeds the fused one (found by a search over
// 16M random pairs: about 1 pair in a million is like this). On amd64 it passes trivially;
// on arm64/ppc64le/s390x (bench/crossarch.sh) it fails if the compiler may fuse Tie's
// multiply-add — the same two runs would be a tie on one node and a win on another.
func TestTieBoundaryNotFused(t *testing.T) {
	for _, p := range [][2]float64{
		{1.7833850977512211, 1.783403931790539},
		{1.7565293349350029, 1.756547900414007},
		{1.7291346770501974, 1.7291529685798832},
	} {
		a, b := p[0], p[1]
		d := b - a
		rounded := 1e-6 + float64(1e-5*b)
		if fused := math.FMA(1e-5, b, 1e-6); !(d == rounded && d > fused) {
			t.Fatalf("pair %v no longer sits between the thresholds (d %v, rounded %v, fused %v)", p, d, rounded, fused)
		}
		if !Tie(a, b) || !Tie(b, a) {
			t.Errorf("Tie(%v, %v) = false: |a−b| = %v equals the rounded threshold; the threshold was fused", a, b, d)
		}
	}
}
