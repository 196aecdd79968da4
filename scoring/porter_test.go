package scoring

import (
	"bufio"
	"compress/gzip"
	"os"
	"strings"
	"testing"
)

// Stems from Porter's paper and NLTK's PorterStemmer (the stemmer rouge_score uses).
func TestPorterStem(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"caresses", "caress"}, {"ponies", "poni"}, {"ties", "tie"}, {"caress", "caress"}, {"cats", "cat"},
		{"feed", "feed"}, {"agreed", "agre"}, {"plastered", "plaster"}, {"bled", "bled"},
		{"motoring", "motor"}, {"sing", "sing"}, {"conflated", "conflat"}, {"troubled", "troubl"},
		{"sized", "size"}, {"hopping", "hop"}, {"tanned", "tan"}, {"falling", "fall"},
		{"hissing", "hiss"}, {"fizzed", "fizz"}, {"failing", "fail"}, {"filing", "file"},
		{"happy", "happi"}, {"sky", "sky"}, {"relational", "relat"}, {"conditional", "condit"},
		{"rational", "ration"}, {"valenci", "valenc"}, {"digitizer", "digit"},
		{"conformabli", "conform"}, {"radicalli", "radic"}, {"differentli", "differ"},
		{"vileli", "vile"}, {"analogousli", "analog"}, {"vietnamization", "vietnam"},
		{"predication", "predic"}, {"operator", "oper"}, {"feudalism", "feudal"},
		{"decisiveness", "decis"}, {"hopefulness", "hope"}, {"callousness", "callous"},
		{"formaliti", "formal"}, {"sensitiviti", "sensit"}, {"sensibiliti", "sensibl"},
		{"triplicate", "triplic"}, {"formative", "form"}, {"formalize", "formal"},
		{"electriciti", "electr"}, {"electrical", "electr"}, {"hopeful", "hope"},
		{"goodness", "good"}, {"revival", "reviv"}, {"allowance", "allow"},
		{"inference", "infer"}, {"airliner", "airlin"}, {"adjustable", "adjust"},
		{"defensible", "defens"}, {"irritant", "irrit"}, {"replacement", "replac"},
		{"adjustment", "adjust"}, {"dependent", "depend"}, {"adoption", "adopt"},
		{"homologou", "homolog"}, {"communism", "commun"}, {"activate", "activ"},
		{"angulariti", "angular"}, {"homologous", "homolog"}, {"effective", "effect"},
		{"bowdlerize", "bowdler"}, {"probate", "probat"}, {"rate", "rate"},
		{"cease", "ceas"}, {"controll", "control"}, {"roll", "roll"},
		{"running", "run"}, {"dogs", "dog"}, {"generalization", "gener"}, {"dying", "die"},
	} {
		if got := porterStem(c.in); got != c.want {
			t.Errorf("porterStem(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestPorterGolden checks porterStem against the stems NLTK's PorterStemmer gave for every
// word of a 73,445-word English list (testdata/porter/gen.py; its header names the NLTK
// version). Words the 1980 algorithm stems differently, such as "aged", "needlessly",
// "traditionally" and "theology", are among them.
func TestPorterGolden(t *testing.T) {
	f, err := os.Open("testdata/porter/words.txt.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	n, bad := 0, 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		word, want, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("golden line %q: want word<TAB>stem", line)
		}
		n++
		if got := porterStem(word); got != want {
			if bad++; bad <= 20 {
				t.Errorf("porterStem(%q) = %q, NLTK gives %q", word, got, want)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 50000 {
		t.Fatalf("golden file has %d words, want at least 50000", n)
	}
	if bad > 0 {
		t.Fatalf("%d of %d words differ from NLTK", bad, n)
	}
}
