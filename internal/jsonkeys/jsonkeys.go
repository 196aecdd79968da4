// Package jsonkeys refuses JSON that readers disagree on: an object that repeats a key, or
// holds two keys that differ only in case ("score" and "Score"). Go's encoding/json takes
// the last of two equal keys and matches struct fields case-insensitively; Python, jq and
// in-toto-python take the last or the exact one; so such a document means different things
// to different verifiers, and every signed or scored input must refuse it.
//
// Hand-written: encoding/json has no option for it, and the JSON v2 packages that refuse
// exact duplicates (behind GOEXPERIMENT, or go-json-experiment) do not fold case.
// Stateless; safe for concurrent use.
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DuplicateError names the repeated key, its other spelling (equal for an exact repeat) and
// where in the document the object is.
type DuplicateError struct {
	Path  string // JSON-pointer-like path of the object, "" for the top level
	Key   string
	Other string
}

func (e *DuplicateError) Error() string {
	where := "the top-level object"
	if e.Path != "" {
		where = "the object at " + e.Path
	}
	if e.Key == e.Other {
		return fmt.Sprintf("key %q appears twice in %s: JSON readers disagree on which one counts; keep one", e.Key, where)
	}
	return fmt.Sprintf("keys %q and %q in %s differ only in case: JSON readers disagree on which one counts; keep one spelling", e.Other, e.Key, where)
}

// Check returns a *DuplicateError for the first object, at any depth, with a repeated or
// case-folded key, an error if b is not one JSON value, and nil otherwise. Keys are
// compared after unescaping ("sc\u006fre" is "score") under Unicode simple case folding,
// the rule encoding/json uses to match fields.
func Check(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		object    bool
		expectKey bool
		keys      map[string]string // folded -> as written
		path      string
		key       string // the key whose value is being read
		index     int    // arrays: the element being read
	}
	var stack []*frame
	childPath := func() string {
		if len(stack) == 0 {
			return ""
		}
		top := stack[len(stack)-1]
		if top.object {
			return top.path + "/" + top.key
		}
		return fmt.Sprintf("%s/%d", top.path, top.index)
	}
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		top := stack[len(stack)-1]
		if top.object {
			top.expectKey = true
		} else {
			top.index++
		}
	}
	for started := false; ; started = true {
		if started && len(stack) == 0 {
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				return errors.New("more than one JSON value")
			}
			return nil
		}
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return errors.New("unexpected end of JSON")
		}
		if err != nil {
			return err
		}
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.object && top.expectKey {
				if d, ok := tok.(json.Delim); ok && d == '}' {
					stack = stack[:len(stack)-1]
					valueDone()
					continue
				}
				key := tok.(string) // the decoder only yields a string here
				f := Fold(key)
				if other, dup := top.keys[f]; dup {
					return &DuplicateError{Path: top.path, Key: key, Other: other}
				}
				top.keys[f] = key
				top.key, top.expectKey = key, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, expectKey: true, keys: map[string]string{}, path: childPath()})
		case json.Delim('['):
			stack = append(stack, &frame{path: childPath()})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// Fold maps s to a representative of its case-folding class: two strings are equal under
// Unicode simple folding (strings.EqualFold) exactly when their Folds are equal.
func Fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToUpper(s) // an ASCII letter's orbit starts with its capital
	}
	var b strings.Builder
	for _, r := range s {
		// The smallest rune of r's folding orbit stands for the orbit.
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < m {
				m = f
			}
		}
		b.WriteRune(m)
	}
	return b.String()
}
