package attest

import (
	"bytes"
)

// fastEnvelope decodes the common shape of a DSSE JSON envelope without reflection: it is
// the hot path of verification (encoding/json spends about as long on an envelope as the
// signature check). It handles a strict subset of JSON — no string escapes, ASCII-only
// strings, no null for a known field, no duplicate or case-folded known keys — and reports
// ok=false for anything else, so that encoding/json decides those inputs. Whenever it says
// ok, its result equals encoding/json's; FuzzDecodeEnvelope checks exactly that.
func fastEnvelope(b []byte) (w wireEnvelope, ok bool) {
	p := fastParser{b: b}
	p.ws()
	if !p.eat('{') {
		return w, false
	}
	var pt, pl string
	var sigs []wireSig
	seen := 0
	if !p.object(func(key []byte) bool {
		switch string(key) {
		case "payloadType":
			if seen&1 != 0 {
				return false
			}
			seen |= 1
			s, ok := p.str()
			pt = s
			return ok
		case "payload":
			if seen&2 != 0 {
				return false
			}
			seen |= 2
			s, ok := p.str()
			pl = s
			return ok
		case "signatures":
			if seen&4 != 0 {
				return false
			}
			seen |= 4
			ss, ok := p.sigs()
			sigs = ss
			return ok
		}
		if bytes.EqualFold(key, []byte("payloadType")) || bytes.EqualFold(key, []byte("payload")) || bytes.EqualFold(key, []byte("signatures")) {
			return false
		}
		return p.skip(0)
	}) {
		return w, false
	}
	p.ws()
	if p.i != len(p.b) {
		return w, false
	}
	if seen&1 != 0 {
		w.PayloadType = &pt
	}
	if seen&2 != 0 {
		w.Payload = &pl
	}
	if seen&4 != 0 {
		w.Signatures = &sigs
	}
	return w, true
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) eat(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *fastParser) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// object parses the members of an object whose '{' was eaten, calling member for each key
// with the parser positioned before the value.
func (p *fastParser) object(member func(key []byte) bool) bool {
	if p.eat('}') {
		return true
	}
	var keys keySet
	for {
		if p.peek() != '"' {
			return false
		}
		key, ok := p.raw()
		if !ok || !keys.add(key) || !p.eat(':') || !member(key) {
			return false
		}
		if p.eat(',') {
			continue
		}
		return p.eat('}')
	}
}

// keySet is the keys of one object so far, to decline (for the reference path to refuse,
// jsonkeys.Check) an object that repeats a key or holds two keys differing only in case, at
// any depth. The fast path's keys are printable ASCII without escapes, so ASCII case
// folding is Unicode folding here. Small objects compare in place; large ones (telemetry)
// switch to a map so a hostile object cannot cost quadratic time.
type keySet struct {
	small [12][]byte
	n     int
	big   map[string]struct{}
}

func (k *keySet) add(key []byte) bool {
	if k.big == nil && k.n < len(k.small) {
		for _, s := range k.small[:k.n] {
			if bytes.EqualFold(s, key) {
				return false
			}
		}
		k.small[k.n] = key
		k.n++
		return true
	}
	if k.big == nil {
		k.big = make(map[string]struct{}, 2*len(k.small))
		for _, s := range k.small[:k.n] {
			k.big[string(bytes.ToUpper(s))] = struct{}{}
		}
	}
	u := string(bytes.ToUpper(key))
	if _, dup := k.big[u]; dup {
		return false
	}
	k.big[u] = struct{}{}
	return true
}

// raw reads a string with no escapes and only printable ASCII, returning its bytes
// (aliasing the input: no allocation).
func (p *fastParser) raw() ([]byte, bool) {
	if !p.eat('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// str is raw as a string.
func (p *fastParser) str() (string, bool) {
	b, ok := p.raw()
	return string(b), ok
}

func (p *fastParser) sigs() ([]wireSig, bool) {
	if !p.eat('[') {
		return nil, false
	}
	sigs := []wireSig{}
	if p.eat(']') {
		return sigs, true
	}
	for {
		if !p.eat('{') {
			return nil, false
		}
		var s wireSig
		seen := 0
		if !p.object(func(key []byte) bool {
			switch string(key) {
			case "keyid":
				if seen&1 != 0 {
					return false
				}
				seen |= 1
				v, ok := p.str()
				s.KeyID = v
				return ok
			case "sig":
				if seen&2 != 0 {
					return false
				}
				seen |= 2
				v, ok := p.str()
				s.Sig = &v
				return ok
			case "extension":
				if seen&4 != 0 || !p.eat('{') {
					return false
				}
				seen |= 4
				ext, ok := p.ext()
				s.Extension = ext
				return ok
			}
			if bytes.EqualFold(key, []byte("keyid")) || bytes.EqualFold(key, []byte("sig")) || bytes.EqualFold(key, []byte("extension")) {
				return false
			}
			return p.skip(0)
		}) {
			return nil, false
		}
		sigs = append(sigs, s)
		if p.eat(',') {
			continue
		}
		if p.eat(']') {
			return sigs, true
		}
		return nil, false
	}
}

func (p *fastParser) ext() (*wireExt, bool) {
	e := &wireExt{}
	seen := 0
	ok := p.object(func(key []byte) bool {
		switch string(key) {
		case "kind":
			if seen&1 != 0 {
				return false
			}
			seen |= 1
			v, ok := p.str()
			e.Kind = v
			return ok
		case "ext":
			if seen&2 != 0 {
				return false
			}
			seen |= 2
			p.ws()
			start := p.i
			if p.peek() == 'n' { // null: encoding/json leaves a RawMessage as the literal
				return false
			}
			if !p.skip(0) {
				return false
			}
			e.Ext = p.b[start:p.i]
			return true
		}
		if bytes.EqualFold(key, []byte("kind")) || bytes.EqualFold(key, []byte("ext")) {
			return false
		}
		return p.skip(0)
	})
	return e, ok
}

// skip validates and passes over one JSON value of the subset.
func (p *fastParser) skip(depth int) bool {
	if depth > 64 {
		return false
	}
	switch p.peek() {
	case '"':
		_, ok := p.raw()
		return ok
	case '{':
		p.i++
		return p.object(func([]byte) bool { return p.skip(depth + 1) })
	case '[':
		p.i++
		if p.eat(']') {
			return true
		}
		for {
			if !p.skip(depth + 1) {
				return false
			}
			if p.eat(',') {
				continue
			}
			return p.eat(']')
		}
	case 't':
		return p.lit("true")
	case 'f':
		return p.lit("false")
	case 'n':
		return p.lit("null")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return p.number()
	}
	return false
}

func (p *fastParser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// number checks the JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *fastParser) number() bool {
	b, i := p.b, p.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	p.i = i
	return true
}
