package jsonkeys

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		in        string
		ok        bool
		path, in2 string
	}{
		{`{"a":1,"b":{"c":[1,{"d":2}]}}`, true, "", ""},
		{`[{"a":1},{"a":2}]`, true, "", ""}, // the same key in two objects is fine
		{`{"a":{"x":1},"b":{"x":1}}`, true, "", ""},
		{`"plain"`, true, "", ""},
		{`{"score":1,"score":2}`, false, "", "appears twice"},
		{`{"score":1,"Score":2}`, false, "", "differ only in case"},
		{`{"sc\u006fre":1,"score":2}`, false, "", "appears twice"},
		{`{"p":{"t":[0,{"k":1,"K":2}]}}`, false, "/p/t/1", "differ only in case"},
		{`{"k":1,"\u212a":2}`, false, "", "differ only in case"}, // KELVIN SIGN folds to k
		{`{"a":1}{"b":2}`, false, "", "more than one"},
		{`{"a":1`, false, "", ""},
	} {
		err := Check([]byte(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("Check(%s) = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), tc.in2) {
			t.Errorf("Check(%s) = %q, want it to say %q", tc.in, err, tc.in2)
		}
		var de *DuplicateError
		if errors.As(err, &de) && de.Path != tc.path {
			t.Errorf("Check(%s) path %q, want %q", tc.in, de.Path, tc.path)
		}
	}
}

func TestFoldMatchesEqualFold(t *testing.T) {
	words := []string{"score", "Score", "SCORE", "ſcore", "k", "K", "\u212a", "straße", "STRASSE", "Σ", "σ", "ς", "ǅ", "ǆ", "Ǆ"}
	for _, a := range words {
		for _, b := range words {
			if (Fold(a) == Fold(b)) != strings.EqualFold(a, b) {
				t.Errorf("Fold(%q)==Fold(%q) is %v, EqualFold says %v", a, b, Fold(a) == Fold(b), strings.EqualFold(a, b))
			}
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1,"A":2}`, `{"a":[{"b":1,"b":2}]}`, `[1,2,{"x":{}}]`, `{"\u00e9":1,"\u00c9":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Check(b)
		if err == nil && !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		var de *DuplicateError
		if errors.As(err, &de) && Fold(de.Key) != Fold(de.Other) {
			t.Fatalf("reported %q and %q as duplicates", de.Key, de.Other)
		}
	})
}
