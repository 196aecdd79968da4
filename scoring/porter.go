package scoring

import "strings"

// porterStem reduces an English word to its stem by Porter's (1980) algorithm, as the
// ROUGE scorer's stemmer does. Input is lower-case ASCII letters and digits, as rougeTokens
// produces. NLTK's PorterStemmer (which rouge_score calls) adds a few extensions on top
// of the 1980 rules (a short list of irregular words, "ies" → "ie" in four-letter words,
// "fulli"/"lessli"/"logi"/"bli" in step 2); those are included below so the stems match.
func porterStem(w string) string {
	if len(w) <= 2 {
		return w
	}
	if s, ok := porterIrregular[w]; ok {
		return s
	}
	b := []byte(w)
	b = step1a(b)
	b = step1b(b)
	b = step1c(b)
	b = step2(b)
	b = step3(b)
	b = step4(b)
	b = step5(b)
	return string(b)
}

// porterIrregular is NLTK's pool of irregular forms (NLTK_EXTENSIONS mode).
var porterIrregular = map[string]string{
	"skies": "sky", "sky": "sky", "dying": "die", "lying": "lie", "tying": "tie",
	"news": "news", "innings": "inning", "inning": "inning", "outings": "outing",
	"outing": "outing", "cannings": "canning", "canning": "canning", "howe": "howe",
	"proceed": "proceed", "exceed": "exceed", "succeed": "succeed",
}

func isCons(b []byte, i int) bool {
	switch b[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !isCons(b, i-1)
	}
	return true
}

// measure is m in [C](VC)^m[V] of b.
func measure(b []byte) int {
	n, i := 0, 0
	for i < len(b) && isCons(b, i) {
		i++
	}
	for i < len(b) {
		for i < len(b) && !isCons(b, i) {
			i++
		}
		if i >= len(b) {
			break
		}
		n++
		for i < len(b) && isCons(b, i) {
			i++
		}
	}
	return n
}

func hasVowel(b []byte) bool {
	for i := range b {
		if !isCons(b, i) {
			return true
		}
	}
	return false
}

func doubleCons(b []byte) bool {
	n := len(b)
	return n >= 2 && b[n-1] == b[n-2] && isCons(b, n-1)
}

// cvc: ends consonant-vowel-consonant, the last not w, x or y.
func cvc(b []byte) bool {
	n := len(b)
	if n < 3 || !isCons(b, n-1) || isCons(b, n-2) || !isCons(b, n-3) {
		return false
	}
	c := b[n-1]
	return c != 'w' && c != 'x' && c != 'y'
}

func hasSuffix(b []byte, s string) bool { return strings.HasSuffix(string(b), s) }

func step1a(b []byte) []byte {
	switch {
	case hasSuffix(b, "sses"):
		return b[:len(b)-2]
	case hasSuffix(b, "ies"):
		if len(b) == 4 {
			return b[:len(b)-1] // NLTK: "dies" → "die"
		}
		return b[:len(b)-2]
	case hasSuffix(b, "ss"):
		return b
	case hasSuffix(b, "s"):
		return b[:len(b)-1]
	}
	return b
}

func step1b(b []byte) []byte {
	if hasSuffix(b, "eed") {
		if measure(b[:len(b)-3]) > 0 {
			return b[:len(b)-1]
		}
		return b
	}
	var stem []byte
	switch {
	case hasSuffix(b, "ed") && hasVowel(b[:len(b)-2]):
		stem = b[:len(b)-2]
	case hasSuffix(b, "ing") && hasVowel(b[:len(b)-3]):
		stem = b[:len(b)-3]
	default:
		return b
	}
	switch {
	case hasSuffix(stem, "at"), hasSuffix(stem, "bl"), hasSuffix(stem, "iz"):
		return append(stem, 'e')
	case doubleCons(stem):
		if c := stem[len(stem)-1]; c != 'l' && c != 's' && c != 'z' {
			return stem[:len(stem)-1]
		}
		return stem
	case measure(stem) == 1 && cvc(stem):
		return append(stem, 'e')
	}
	return stem
}

func step1c(b []byte) []byte {
	// NLTK: y → i only after a consonant that is not the word's first letter.
	n := len(b)
	if b[n-1] == 'y' && n > 2 && isCons(b, n-2) {
		b[n-1] = 'i'
	}
	return b
}

type rule struct{ suffix, repl string }

var step2Rules = []rule{
	{"ational", "ate"}, {"tional", "tion"}, {"enci", "ence"}, {"anci", "ance"}, {"izer", "ize"},
	{"bli", "ble"}, {"alli", "al"}, {"entli", "ent"}, {"eli", "e"}, {"ousli", "ous"},
	{"ization", "ize"}, {"ation", "ate"}, {"ator", "ate"}, {"alism", "al"}, {"iveness", "ive"},
	{"fulness", "ful"}, {"ousness", "ous"}, {"aliti", "al"}, {"iviti", "ive"}, {"biliti", "ble"},
	{"fulli", "ful"}, {"lessli", "less"}, {"logi", "log"},
}

var step3Rules = []rule{
	{"icate", "ic"}, {"ative", ""}, {"alize", "al"}, {"iciti", "ic"}, {"ical", "ic"},
	{"ful", ""}, {"ness", ""},
}

var step4Suffixes = []string{
	"al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent",
	"ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize",
}

// applyRules replaces the longest matching suffix when the stem's measure exceeds minM;
// if the longest match fails its condition nothing else is tried (Porter's rule).
func applyRules(b []byte, rules []rule, minM int) []byte {
	best := -1
	for i, r := range rules {
		if hasSuffix(b, r.suffix) && (best < 0 || len(r.suffix) > len(rules[best].suffix)) {
			best = i
		}
	}
	if best < 0 {
		return b
	}
	r := rules[best]
	stem := b[:len(b)-len(r.suffix)]
	if measure(stem) > minM {
		return append(stem, r.repl...)
	}
	return b
}

func step2(b []byte) []byte { return applyRules(b, step2Rules, 0) }
func step3(b []byte) []byte { return applyRules(b, step3Rules, 0) }

func step4(b []byte) []byte {
	best := ""
	for _, s := range step4Suffixes {
		if hasSuffix(b, s) && len(s) > len(best) {
			best = s
		}
	}
	if best == "" {
		return b
	}
	stem := b[:len(b)-len(best)]
	if measure(stem) <= 1 {
		return b
	}
	if best == "ion" {
		if n := len(stem); n == 0 || (stem[n-1] != 's' && stem[n-1] != 't') {
			return b
		}
	}
	return stem
}

func step5(b []byte) []byte {
	if b[len(b)-1] == 'e' {
		stem := b[:len(b)-1]
		m := measure(stem)
		if m > 1 || (m == 1 && !cvc(stem)) {
			b = stem
		}
	}
	if n := len(b); n > 1 && b[n-1] == 'l' && b[n-2] == 'l' && measure(b) > 1 {
		b = b[:n-1]
	}
	return b
}
