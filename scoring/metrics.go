package scoring

import (
	"math"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MetricInfo says how to read a metric's values: which direction is better, the best value
// it can take, and how far apart two honest computations of the same submission may be
// (re-scores on another machine differ only by float summation order, if at all).
type MetricInfo struct {
	Name          string
	LowerIsBetter bool
	Optimum       float64
	Tolerance     float64
}

// metricTable lists every metric ScoreCSV knows, under every name AIRS-Bench and
// HeurekaBench spell it. Keys are lower-case; LookupMetric folds case.
var metricTable = map[string]MetricInfo{
	"accuracy":            {Name: "Accuracy", Optimum: 1, Tolerance: 1e-9},
	"exactmatch":          {Name: "ExactMatch", Optimum: 1, Tolerance: 1e-9},
	"meanabsoluteerror":   {Name: "MeanAbsoluteError", LowerIsBetter: true, Optimum: 0, Tolerance: 1e-6},
	"mae":                 {Name: "MAE", LowerIsBetter: true, Optimum: 0, Tolerance: 1e-6},
	"mase":                {Name: "MASE", LowerIsBetter: true, Optimum: 0, Tolerance: 1e-6},
	"spearmancorrelation": {Name: "SpearmanCorrelation", Optimum: 1, Tolerance: 1e-9},
	"mrr":                 {Name: "MRR", Optimum: 1, Tolerance: 1e-9},
	"rougel":              {Name: "RougeL", Optimum: 1, Tolerance: 1e-9},
	"mcqaccuracy":         {Name: "MCQAccuracy", Optimum: 1, Tolerance: 1e-9},
	"mcqprecisionmacro":   {Name: "MCQPrecisionMacro", Optimum: 1, Tolerance: 1e-9},
	"mcqrecallmacro":      {Name: "MCQRecallMacro", Optimum: 1, Tolerance: 1e-9},
	"mcqf1macro":          {Name: "MCQF1Macro", Optimum: 1, Tolerance: 1e-9},
	"mcqprecisionmicro":   {Name: "MCQPrecisionMicro", Optimum: 1, Tolerance: 1e-9},
	"mcqrecallmicro":      {Name: "MCQRecallMicro", Optimum: 1, Tolerance: 1e-9},
	"mcqf1micro":          {Name: "MCQF1Micro", Optimum: 1, Tolerance: 1e-9},
	// A judge's verdicts are re-scored by running the judge again: a deterministic judge
	// gives the very same mean, a sampling one does not, and that is a disagreement.
	"oeqcorrectness": {Name: OEQMetric, Optimum: OEQMax, Tolerance: 0},
}

// LookupMetric returns the metric named name (case-insensitive). Pass@k is recognised for
// any k ≥ 1 ("Pass@5"); its Name keeps the spelling "Pass@k" with the given k.
func LookupMetric(name string) (MetricInfo, bool) {
	key := strings.ToLower(strings.TrimSpace(name))
	if m, ok := metricTable[key]; ok {
		return m, true
	}
	if k, ok := parsePassK(key); ok {
		return MetricInfo{Name: "Pass@" + itoa(k), Optimum: 1, Tolerance: 1e-9}, true
	}
	return MetricInfo{}, false
}

// MetricNames lists the canonical metric names, sorted (Pass@k stands for the family).
func MetricNames() []string {
	var out []string
	for _, m := range metricTable {
		out = append(out, m.Name)
	}
	out = append(out, "Pass@k")
	sort.Strings(out)
	return out
}

func parsePassK(key string) (int, bool) {
	if !strings.HasPrefix(key, "pass@") {
		return 0, false
	}
	s := key[len("pass@"):]
	if s == "" || len(s) > 4 {
		return 0, false
	}
	k := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
		k = k*10 + int(r-'0')
	}
	return k, k >= 1
}

func itoa(k int) string {
	if k == 0 {
		return "0"
	}
	var b []byte
	for k > 0 {
		b = append([]byte{byte('0' + k%10)}, b...)
		k /= 10
	}
	return string(b)
}

// PassAtK is the unbiased pass@k estimator of Chen et al. (2021) averaged over problems:
// for a problem with n programs of which c pass, 1 − C(n−c, k)/C(n, k). outcomes[i] holds
// problem i's per-program results. A problem with fewer than k programs counts as passed
// iff any program passed (the estimator's limit), so short rows are not an error here.
func PassAtK(outcomes [][]bool, k int) float64 {
	if len(outcomes) == 0 || k < 1 {
		return 0
	}
	var sum float64
	for _, row := range outcomes {
		n, c := len(row), 0
		for _, ok := range row {
			if ok {
				c++
			}
		}
		switch {
		case c == 0:
			// contributes 0
		case n-c < k:
			sum++
		default:
			// 1 − Π_{i=n−c+1}^{n} (1 − k/i), the numerically stable product form.
			prod := 1.0
			for i := n - c + 1; i <= n; i++ {
				prod *= 1 - float64(k)/float64(i)
			}
			sum += 1 - prod
		}
	}
	return sum / float64(len(outcomes))
}

// Spearman is the Spearman rank correlation of x and y (average ranks for ties, then the
// Pearson correlation of the ranks, as scipy.stats.spearmanr). It returns NaN when either
// side is constant or the lengths differ or are below 2.
func Spearman(x, y []float64) float64 {
	if len(x) != len(y) || len(x) < 2 {
		return math.NaN()
	}
	return pearson(ranks(x), ranks(y))
}

func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		avg := float64(float64(i+j)/2) + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = avg
		}
		i = j + 1
	}
	return r
}

func pearson(x, y []float64) float64 {
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= n
	my /= n
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		// float64(): no fused multiply-add, so every architecture gets the same bits.
		sxy += float64(dx * dy)
		sxx += float64(dx * dx)
		syy += float64(dy * dy)
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	return sxy / math.Sqrt(sxx*syy)
}

// MASESeries is one forecast for MASE: the in-sample history (for the naive-forecast scale),
// and the true and predicted values over the horizon. NaN in History or Actual is skipped.
type MASESeries struct {
	History, Actual, Predicted []float64
}

// MASE is the mean over series of MAE(horizon) / MAE(one-step naive forecast on the history),
// as sktime's mean_absolute_scaled_error with sp=1, averaged the way AIRS-Bench's evaluator
// does. Series whose history is constant (scale 0) or whose horizon is all NaN are skipped,
// since their scaled error is undefined; ok is false when every series was skipped.
func MASE(series []MASESeries) (v float64, ok bool) {
	var sum float64
	var n int
	for _, s := range series {
		var h []float64
		for _, x := range s.History {
			if !math.IsNaN(x) {
				h = append(h, x)
			}
		}
		if len(h) < 2 {
			continue
		}
		var scale float64
		for i := 1; i < len(h); i++ {
			scale += math.Abs(h[i] - h[i-1])
		}
		scale /= float64(len(h) - 1)
		if scale == 0 {
			continue
		}
		var e float64
		var m int
		for i := range s.Actual {
			if math.IsNaN(s.Actual[i]) || i >= len(s.Predicted) {
				continue
			}
			e += math.Abs(s.Actual[i] - s.Predicted[i])
			m++
		}
		if m == 0 {
			continue
		}
		sum += e / float64(m) / scale
		n++
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// NormalizeSQuAD is the SQuAD v1.1 answer normalisation (normalize_answer in the official
// evaluate script): lower case; drop Python's string.punctuation — ASCII punctuation and
// symbols only, so “curly quotes” and — dashes stay; replace the words a/an/the (regex
// \b(a|an|the)\b, word characters being Unicode letters, digits and _) by a space;
// collapse white space.
func NormalizeSQuAD(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		if r < 128 && (unicode.IsPunct(r) || unicode.IsSymbol(r)) {
			continue
		}
		b.WriteRune(r)
	}
	s = b.String()
	b.Reset()
	isWord := func(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) }
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isWord(r) {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		j := i
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			if !isWord(r) {
				break
			}
			j += n
		}
		switch w := s[i:j]; w {
		case "a", "an", "the":
			b.WriteByte(' ')
		default:
			b.WriteString(w)
		}
		i = j
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// RougeLF is the ROUGE-L F-measure of a prediction against a reference: longest common
// subsequence over tokens, as Google's rouge_score with its default tokenizer (lower case,
// runs of [a-z0-9]) and the Porter stemmer on tokens longer than 3 letters.
func RougeLF(reference, prediction string) float64 {
	ref, pred := rougeTokens(reference), rougeTokens(prediction)
	if len(ref) == 0 || len(pred) == 0 {
		return 0
	}
	l := lcs(ref, pred)
	if l == 0 {
		return 0
	}
	p := float64(l) / float64(len(pred))
	r := float64(l) / float64(len(ref))
	return 2 * p * r / (p + r)
}

func rougeTokens(s string) []string {
	s = strings.ToLower(s)
	toks := strings.FieldsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	for i, t := range toks {
		if len(t) > 3 {
			toks[i] = porterStem(t)
		}
	}
	return toks
}

func lcs(a, b []string) int {
	if len(a) < len(b) {
		a, b = b, a
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			if a[i-1] == b[j-1] {
				cur[j] = prev[j-1] + 1
			} else if prev[j] >= cur[j-1] {
				cur[j] = prev[j]
			} else {
				cur[j] = cur[j-1]
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// MCQCounts holds HeurekaBench multiple-choice results: per question the predicted and
// correct letter sets (upper case A–D). An empty prediction is an unanswered question.
type MCQCounts struct {
	Questions, Exact, Answered int
	TP, FP, FN                 int
	MacroP, MacroR, MacroF1    float64 // sums over answered questions; divide by Answered
}

// MCQ scores multiple-choice answers the HeurekaBench way.
func MCQ(pred, gold []string) MCQCounts {
	var c MCQCounts
	for i := range gold {
		g := letterSet(gold[i])
		var p uint8
		if i < len(pred) {
			p = letterSet(pred[i])
		}
		c.Questions++
		tp := bitsCount(p & g)
		fp := bitsCount(p &^ g)
		fn := bitsCount(g &^ p)
		c.TP += tp
		c.FP += fp
		c.FN += fn
		if p == g && p != 0 {
			c.Exact++
		}
		if p == 0 {
			continue
		}
		c.Answered++
		pr := float64(tp) / float64(tp+fp)
		var rc float64
		if tp+fn > 0 {
			rc = float64(tp) / float64(tp+fn)
		}
		c.MacroP += pr
		c.MacroR += rc
		if pr+rc > 0 {
			c.MacroF1 += 2 * pr * rc / (pr + rc)
		}
	}
	return c
}

// Value returns the named MCQ metric (MCQAccuracy, MCQPrecisionMacro, …).
func (c MCQCounts) Value(name string) float64 {
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	microP := div(float64(c.TP), float64(c.TP+c.FP))
	microR := div(float64(c.TP), float64(c.TP+c.FN))
	switch strings.ToLower(name) {
	case "mcqaccuracy":
		return div(float64(c.Exact), float64(c.Questions))
	case "mcqprecisionmacro":
		return div(c.MacroP, float64(c.Answered))
	case "mcqrecallmacro":
		return div(c.MacroR, float64(c.Answered))
	case "mcqf1macro":
		return div(c.MacroF1, float64(c.Answered))
	case "mcqprecisionmicro":
		return microP
	case "mcqrecallmicro":
		return microR
	case "mcqf1micro":
		return div(2*microP*microR, microP+microR)
	}
	return math.NaN()
}

// letterSet parses "A, c" into a bit set; ok letters are A–D. Anything else is dropped by
// letterSet; the CSV path rejects it first with parseLetters.
func letterSet(s string) uint8 {
	v, _ := parseLetters(s)
	return v
}

func parseLetters(s string) (uint8, bool) {
	var v uint8
	ok := true
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || unicode.IsSpace(r) }) {
		if len(part) != 1 {
			ok = false
			continue
		}
		ch := part[0] | 0x20
		if ch < 'a' || ch > 'd' {
			ok = false
			continue
		}
		v |= 1 << (ch - 'a')
	}
	return v, ok
}

func bitsCount(v uint8) int {
	n := 0
	for v != 0 {
		n += int(v & 1)
		v >>= 1
	}
	return n
}

// Range is the interval the metric's values can take: the optimum at the better end, and
// at the other the worst value the metric can reach (0 for rates and errors, -1 for a
// correlation, +Inf for an unbounded error). Results outside it are not honest
// computations of the metric.
func (m MetricInfo) Range() (lo, hi float64) {
	switch {
	case m.LowerIsBetter:
		return m.Optimum, math.Inf(1)
	case m.Name == "SpearmanCorrelation":
		return -1, m.Optimum
	case m.Name == OEQMetric:
		return OEQMin, m.Optimum
	default:
		return 0, m.Optimum
	}
}
