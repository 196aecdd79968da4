package scoring

import "testing"

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
