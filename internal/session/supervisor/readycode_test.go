package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// Every class of start failure travels as a code and comes back as its
// sentinel with the supervisor's message; an error that only reads like
// one of them (its text inside another message) is in no class.
func TestReadyCodesRoundTrip(t *testing.T) {
	sentinels := map[error]error{syscall.EDQUOT: syscall.ENOSPC} // EDQUOT is a full disk too
	for _, s := range readyCodes {
		sentinels[s] = s
	}
	for cause, want := range sentinels {
		err := fmt.Errorf("session dir: %w", cause)
		var r ready
		b, _ := json.Marshal(ready{Error: err.Error(), Code: readyCode(err)})
		if e := json.Unmarshal(b, &r); e != nil {
			t.Fatal(e)
		}
		got := reportError(r)
		if !errors.Is(got, want) || got.Error() != err.Error() {
			t.Errorf("%v: got %v (is %v: %v)", cause, got, want, errors.Is(got, want))
		}
		look := errors.New("spawn /srv/" + cause.Error() + ": no such file or directory")
		if c := readyCode(look); c != "" {
			t.Errorf("%q is classified %q by its text", look, c)
		}
		if got := reportError(ready{Error: look.Error(), Code: readyCode(look)}); errors.Is(got, want) {
			t.Errorf("%q reads as %v", look, want)
		}
	}
}
