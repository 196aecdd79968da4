package scoring

import "math"

// Deterministic floating point for the ledger (docs/design.md §7: honest nodes must produce the
// same bytes). Two things would otherwise let the architecture reach the output:
//
//   - math.Exp has assembly on amd64, arm64, loong64 and s390x, math.Log on amd64 and
//     s390x (and Log10/Log1p on s390x); the implementations differ in the last bits.
//   - The Go spec lets the compiler fuse x*y + z into one FMA (it does on arm64, ppc64le,
//     s390x, riscv64, loong64 — not on amd64), which skips a rounding. An explicit
//     float64(...) conversion forces the rounding and blocks the fusion, even across
//     statements — a plain assignment does not.
//
// So the ledger's numeric path uses dlog/dexp/dlog1p/dlog10 below — Go's portable
// algorithms (FreeBSD's msun), copied with every product that feeds a sum wrapped in
// float64() — and writes its own sums the same way. Only +, −, ×, ÷ and math.Sqrt (all
// correctly rounded by IEEE 754, hence identical everywhere) and exact operations (Abs,
// Floor, Frexp, Ldexp, comparisons) remain. bench/crossarch.sh checks the result under
// qemu: the same golden roots and intermediate bits on amd64, arm64, ppc64le and s390x,
// and no fused multiply-add instruction in this package.

// dlog is math.Log computed the same way on every architecture.
func dlog(x float64) float64 {
	const (
		Ln2Hi = 6.93147180369123816490e-01 /* 3fe62e42 fee00000 */
		Ln2Lo = 1.90821492927058770002e-10 /* 3dea39ef 35793c76 */
		L1    = 6.666666666666735130e-01   /* 3FE55555 55555593 */
		L2    = 3.999999999940941908e-01   /* 3FD99999 9997FA04 */
		L3    = 2.857142874366239149e-01   /* 3FD24924 94229359 */
		L4    = 2.222219843214978396e-01   /* 3FCC71C5 1D8E78AF */
		L5    = 1.818357216161805012e-01   /* 3FC74664 96CB03DE */
		L6    = 1.531383769920937332e-01   /* 3FC39A09 D078C69F */
		L7    = 1.479819860511658591e-01   /* 3FC2F112 DF3E5244 */
	)
	var f1 float64
	var ki int
	// A positive normal x (every call on the ledger's hot paths) is split into fraction
	// and exponent from its bits, as math.Frexp splits it: the same f1 and ki without the
	// special cases' tests and the call (dlog was a third of the binomial draws' cost).
	if b := math.Float64bits(x); b>>52-1 < 0x7fe {
		f1, ki = math.Float64frombits(b&^(0x7ff<<52)|1022<<52), int(b>>52)-1022
	} else {
		switch {
		case math.IsNaN(x) || math.IsInf(x, 1):
			return x
		case x < 0:
			return math.NaN()
		case x == 0:
			return math.Inf(-1)
		}
		f1, ki = math.Frexp(x)
	}
	if f1 < math.Sqrt2/2 {
		f1 *= 2
		ki--
	}
	f := f1 - 1
	k := float64(ki)
	s := f / (2 + f)
	s2 := float64(s * s)
	s4 := float64(s2 * s2)
	t1 := float64(s2 * (L1 + float64(s4*(L3+float64(s4*(L5+float64(s4*L7)))))))
	t2 := float64(s4 * (L2 + float64(s4*(L4+float64(s4*L6)))))
	R := t1 + t2
	hfsq := float64(float64(0.5*f) * f)
	return float64(k*Ln2Hi) - ((hfsq - (float64(s*(hfsq+R)) + float64(k*Ln2Lo))) - f)
}

// dlog10 is math.Log10 (log(x)·(1/ln 10), as Go's portable code) on every architecture.
func dlog10(x float64) float64 { return float64(dlog(x) * (1 / math.Ln10)) }

// dexp is math.Exp computed the same way on every architecture.
func dexp(x float64) float64 {
	const (
		Ln2Hi = 6.93147180369123816490e-01
		Ln2Lo = 1.90821492927058770002e-10
		Log2e = 1.44269504088896338700e+00

		Overflow  = 7.09782712893383973096e+02
		Underflow = -7.45133219101941108420e+02
		NearZero  = 1.0 / (1 << 28) // 2**-28

		P1 = 1.66666666666666657415e-01  /* 0x3FC55555; 0x55555555 */
		P2 = -2.77777777770155933842e-03 /* 0xBF66C16C; 0x16BEBD93 */
		P3 = 6.61375632143793436117e-05  /* 0x3F11566A; 0xAF25DE2C */
		P4 = -1.65339022054652515390e-06 /* 0xBEBBBD41; 0xC5D26BF1 */
		P5 = 4.13813679705723846039e-08  /* 0x3E663769; 0x72BEA4D0 */
	)
	switch {
	case math.IsNaN(x):
		return x
	case x > Overflow:
		return math.Inf(1)
	case x < Underflow:
		return 0
	case -NearZero < x && x < NearZero:
		return 1 + x
	}
	var k int
	switch {
	case x < 0:
		k = int(float64(Log2e*x) - 0.5)
	case x > 0:
		k = int(float64(Log2e*x) + 0.5)
	}
	hi := x - float64(float64(k)*Ln2Hi)
	lo := float64(float64(k) * Ln2Lo)
	r := hi - lo
	t := float64(r * r)
	c := r - float64(t*(P1+float64(t*(P2+float64(t*(P3+float64(t*(P4+float64(t*P5)))))))))
	y := 1 - ((lo - float64(r*c)/(2-c)) - hi)
	return math.Ldexp(y, k)
}

// dlog1p is math.Log1p computed the same way on every architecture.
func dlog1p(x float64) float64 {
	const (
		Sqrt2M1     = 4.142135623730950488017e-01  // Sqrt(2)-1 = 0x3fda827999fcef34
		Sqrt2HalfM1 = -2.928932188134524755992e-01 // Sqrt(2)/2-1 = 0xbfd2bec333018866
		Small       = 1.0 / (1 << 29)              // 2**-29 = 0x3e20000000000000
		Tiny        = 1.0 / (1 << 54)              // 2**-54
		Two53       = 1 << 53                      // 2**53
		Ln2Hi       = 6.93147180369123816490e-01   // 3fe62e42fee00000
		Ln2Lo       = 1.90821492927058770002e-10   // 3dea39ef35793c76
		Lp1         = 6.666666666666735130e-01     // 3FE5555555555593
		Lp2         = 3.999999999940941908e-01     // 3FD999999997FA04
		Lp3         = 2.857142874366239149e-01     // 3FD2492494229359
		Lp4         = 2.222219843214978396e-01     // 3FCC71C51D8E78AF
		Lp5         = 1.818357216161805012e-01     // 3FC7466496CB03DE
		Lp6         = 1.531383769920937332e-01     // 3FC39A09D078C69F
		Lp7         = 1.479819860511658591e-01     // 3FC2F112DF3E5244
	)
	switch {
	case x < -1 || math.IsNaN(x):
		return math.NaN()
	case x == -1:
		return math.Inf(-1)
	case math.IsInf(x, 1):
		return math.Inf(1)
	}
	absx := math.Abs(x)
	var f float64
	var iu uint64
	k := 1
	if absx < Sqrt2M1 {
		if absx < Small {
			if absx < Tiny {
				return x
			}
			return x - float64(float64(x*x)*0.5)
		}
		if x > Sqrt2HalfM1 {
			k = 0
			f = x
			iu = 1
		}
	}
	var c float64
	if k != 0 {
		var u float64
		if absx < Two53 {
			u = 1.0 + x
			iu = math.Float64bits(u)
			k = int((iu >> 52) - 1023)
			if k > 0 {
				c = 1.0 - (u - x)
			} else {
				c = x - (u - 1.0)
			}
			c /= u
		} else {
			u = x
			iu = math.Float64bits(u)
			k = int((iu >> 52) - 1023)
			c = 0
		}
		iu &= 0x000fffffffffffff
		if iu < 0x0006a09e667f3bcd {
			u = math.Float64frombits(iu | 0x3ff0000000000000)
		} else {
			k++
			u = math.Float64frombits(iu | 0x3fe0000000000000)
			iu = (0x0010000000000000 - iu) >> 2
		}
		f = u - 1.0
	}
	hfsq := float64(float64(0.5*f) * f)
	var s, R, z float64
	fk := float64(k)
	if iu == 0 {
		if f == 0 {
			if k == 0 {
				return 0
			}
			c += float64(fk * Ln2Lo)
			return float64(fk*Ln2Hi) + c
		}
		R = float64(hfsq * (1.0 - float64(0.66666666666666666*f)))
		if k == 0 {
			return f - R
		}
		return float64(fk*Ln2Hi) - ((R - (float64(fk*Ln2Lo) + c)) - f)
	}
	s = f / (2.0 + f)
	z = float64(s * s)
	R = float64(z * (Lp1 + float64(z*(Lp2+float64(z*(Lp3+float64(z*(Lp4+float64(z*(Lp5+float64(z*(Lp6+float64(z*Lp7)))))))))))))
	if k == 0 {
		return f - (hfsq - float64(s*(hfsq+R)))
	}
	return float64(fk*Ln2Hi) - ((hfsq - (float64(s*(hfsq+R)) + (float64(fk*Ln2Lo) + c))) - f)
}

// cholesky factors the symmetric positive definite P×P matrix a (row-major, lower
// triangle read) in place into L with a = L·Lᵀ, in a fixed operation order with no fused
// multiply-add, so every architecture gets the same bits (gonum's BLAS has amd64 assembly
// and is compiled with fusion elsewhere). ok is false when a is not positive definite to
// working precision.
func cholesky(a []float64, P int) (ok bool) {
	for j := 0; j < P; j++ {
		rj := a[j*P : j*P+j]
		d := a[j*P+j] - dot(rj, rj)
		if !(d > 0) {
			return false
		}
		d = math.Sqrt(d)
		a[j*P+j] = d
		i := j + 1
		// Two rows at a time: each row's dot is dot's own sum, in its order, but the two
		// share the loads of rj and their eight partial sums keep the adder busier (the
		// refits' factorisations were 0.1 CPU-s of a 1M-result ledger).
		for ; i+1 < P; i += 2 {
			s0, s1 := dot2(a[i*P:i*P+j], a[(i+1)*P:(i+1)*P+j], rj)
			a[i*P+j] = (a[i*P+j] - s0) / d
			a[(i+1)*P+j] = (a[(i+1)*P+j] - s1) / d
		}
		for ; i < P; i++ {
			a[i*P+j] = (a[i*P+j] - dot(a[i*P:i*P+j], rj)) / d
		}
	}
	return true
}

// dot2 is (dot(a, c), dot(b, c)), each to the bit (TestDot2MatchesDot).
func dot2(a, b, c []float64) (float64, float64) {
	b, c = b[:len(a)], c[:len(a)]
	var s0, s1, s2, s3, t0, t1, t2, t3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		c0, c1, c2, c3 := c[i], c[i+1], c[i+2], c[i+3]
		s0 += float64(a[i] * c0)
		t0 += float64(b[i] * c0)
		s1 += float64(a[i+1] * c1)
		t1 += float64(b[i+1] * c1)
		s2 += float64(a[i+2] * c2)
		t2 += float64(b[i+2] * c2)
		s3 += float64(a[i+3] * c3)
		t3 += float64(b[i+3] * c3)
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i] * c[i])
		t0 += float64(b[i] * c[i])
	}
	return (s0 + s1) + (s2 + s3), (t0 + t1) + (t2 + t3)
}

// choleskySolve solves L·Lᵀ·x = b for the factor cholesky left in l; x may alias b.
func choleskySolve(l []float64, P int, b, x []float64) {
	copy(x, b)
	for i := 0; i < P; i++ {
		x[i] = (x[i] - dot(l[i*P:i*P+i], x[:i])) / l[i*P+i]
	}
	for i := P - 1; i >= 0; i-- {
		s := x[i]
		for k := i + 1; k < P; k++ {
			s -= float64(l[k*P+i] * x[k])
		}
		x[i] = s / l[i*P+i]
	}
}

// dot is Σ a_i·b_i in a fixed order (four interleaved partial sums, for speed), products
// rounded before they are added.
func dot(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float64(a[i] * b[i])
		s1 += float64(a[i+1] * b[i+1])
		s2 += float64(a[i+2] * b[i+2])
		s3 += float64(a[i+3] * b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i] * b[i])
	}
	return (s0 + s1) + (s2 + s3)
}
