package apitype

import (
	"strings"
	"testing"
)

// TestParseQueryGenerated sends every query parameter of HTTPQuery the
// classes of text a query string or a Last-Event-ID header can hold:
// decimal values at and beyond the range, fractions, non-finite
// spellings, other number syntaxes, junk. A decimal in range is its
// value; anything else is invalid_argument naming the parameter.
func TestParseQueryGenerated(t *testing.T) {
	n := 0
	for _, r := range Ranges(HTTPQuery{}) {
		type c struct {
			s    string
			want float64
			ok   bool
		}
		cases := []c{{"", 0, true}, {"  ", 0, true}, {"0", 0, true}, {"-0", 0, true}, {" 7 ", 7, true}, {"+7", 7, true},
			{fmtNum(r.Max), r.Max, true}, {fmtNum(r.Min), r.Min, true}, {"1e2", 100, true},
			{fmtNum(r.Max*2 + 1), 0, false}, {"-1", 0, false}, {"1.5", 0, false}, {"NaN", 0, false}, {"Inf", 0, false},
			{"-Infinity", 0, false}, {"1e400", 0, false}, {"-1e400", 0, false}, {"0x10", 0, false}, {"0x1p4", 0, false},
			{"1_000", 0, false}, {"abc", 0, false}, {"5s", 0, false}, {"\x00", 0, false}, {"\xff", 0, false},
			{"9223372036854775807", 0, false}, {"18446744073709551616", 0, false}, {strings.Repeat("9", 10000), 0, false},
			{"1,2", 0, false}, {"٣", 0, false}}
		for _, k := range cases {
			n++
			v, e := ParseQuery(r.Field, k.s)
			switch {
			case k.ok && (e != nil || float64(v) != k.want):
				t.Errorf("%s=%q: %d, %v; want %v", r.Field, k.s, v, e, k.want)
			case !k.ok && (e == nil || e.Code != CodeInvalidArgument || !strings.Contains(e.Message, `"`+r.Field+`"`)):
				t.Errorf("%s=%q: %d, %v; want invalid_argument naming it", r.Field, k.s, v, e)
			case !k.ok && !strings.Contains(e.Message, r.String()):
				t.Errorf("%s=%q: %q does not state the range", r.Field, k.s, e.Message)
			}
		}
	}
	if _, e := ParseQuery("nope", "1"); e == nil || e.Code != CodeInternal {
		t.Errorf("unknown parameter: %v", e)
	}
}
