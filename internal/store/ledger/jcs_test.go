package ledger

import (
	"encoding/json"
	"math"
	"testing"
)

func TestCanonicalRFC8785(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		// RFC 8785 §3.2.4: the sample input and its canonical form.
		{"sample", `{
		  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
		  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
		  "literals": [null, true, false]
		}`, `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		// RFC 8785 §3.2.3: member names sorted by UTF-16 code units (the emoji's surrogate
		// pair sorts before U+FB33, unlike in code point order).
		{"sorting", `{
		  "\u20ac": "Euro Sign",
		  "\r": "Carriage Return",
		  "\ufb33": "Hebrew Letter Dalet With Dagesh",
		  "1": "One",
		  "\ud83d\ude00": "Emoji: Grinning Face",
		  "\u0080": "Control",
		  "\u00f6": "Latin Small Letter O With Diaeresis"
		}`, "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		// Escaping: the short forms, \u00xx lowercase for other controls, nothing else
		// escaped (not '/', not HTML characters, not U+2028).
		{"escapes", `"\b\f\n\r\t\u0000\u001f\u007f</>&\u2028\"\\"`, "\"\\b\\f\\n\\r\\t\\u0000\\u001f\u007f</>&\u2028\\\"\\\\\""},
		{"nested", `{"b":[{"z":1,"a":{"y":2,"x":[]}}],"a":{}}`, `{"a":{},"b":[{"a":{"x":[],"y":2},"z":1}]}`},
		{"integers", `[0, -0, 1, -1, 9007199254740992, -9007199254740992, 1700000000000, 10.0, 1e2]`, `[0,0,1,-1,9007199254740992,-9007199254740992,1700000000000,10,100]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// RFC 8785 Appendix B: IEEE 754 doubles and their ECMAScript serialisations.
func TestCanonicalNumbers(t *testing.T) {
	for _, tc := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	} {
		f := math.Float64frombits(tc.bits)
		got, err := formatES6(f)
		if err != nil || got != tc.want {
			t.Errorf("%016x (%v): got %q %v, want %q", tc.bits, f, got, err, tc.want)
		}
		// The same through the JSON path, from Go's shortest representation.
		b, _ := json.Marshal(f)
		if got, err := canonicalNumber(json.Number(b)); err != nil || got != tc.want {
			t.Errorf("%016x via json %s: got %q %v, want %q", tc.bits, b, got, err, tc.want)
		}
	}
	if _, err := formatES6(math.Inf(1)); err == nil {
		t.Error("Inf accepted")
	}
	if _, err := Canonical([]byte(`1e400`)); err == nil {
		t.Error("1e400 accepted")
	}
}

func TestCanonicalIdempotent(t *testing.T) {
	in := `{"z":"\u00e9\ud83d\ude00","a":[1.5,-2e-7,1e21,123456789012345680000],"m":{"\u00e9":1,"e":2}}`
	once, err := Canonical([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	twice, err := Canonical(once)
	if err != nil || string(once) != string(twice) {
		t.Fatalf("not idempotent: %s / %s %v", once, twice, err)
	}
}
