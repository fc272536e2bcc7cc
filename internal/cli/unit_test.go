package cli

import (
	"log/slog"
	"testing"

	"github.com/conchsh/conch/client"
)

func TestShellJoin(t *testing.T) {
	// A first word that is a keyword or an assignment is quoted too.
	got := shellJoin([]string{"printf", "%s\n", "a b", "it's", "", "x=1", "~/f", "$HOME", "if", "a'\tb"})
	want := `printf '%s` + "\n" + `' 'a b' "it's" '' 'x=1' '~/f' '$HOME' 'if' 'a'\''` + "\t" + `b'`
	if got != want {
		t.Fatalf("shellJoin = %q, want %q", got, want)
	}
}

func endOf(state string, code *int, sig, by *string) client.End {
	return client.End{State: state, ExitCode: code, Signal: sig, KilledBy: by}
}

func TestExecExitCode(t *testing.T) {
	i := func(n int) *int { return &n }
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		e    sessionEnd
		want int
	}{
		{sessionEnd{End: endOf("exited", i(0), nil, nil)}, 0},
		{sessionEnd{End: endOf("exited", i(42), nil, nil)}, 42},
		{sessionEnd{End: endOf("signaled", nil, s("SIGKILL"), nil)}, 137},
		{sessionEnd{End: endOf("killed", nil, s("SIGTERM"), s("agent"))}, 143},
		{sessionEnd{End: endOf("killed", i(0), nil, s("operator"))}, 0},
		{sessionEnd{End: endOf("killed", nil, s("SIGTERM"), s("timeout"))}, 124},
		{sessionEnd{End: endOf("denied", nil, nil, nil)}, 77},
		{sessionEnd{End: endOf("lost", nil, nil, nil)}, 125},
		{sessionEnd{End: endOf("", i(1), nil, nil)}, 1},
		{sessionEnd{End: endOf("", nil, nil, nil)}, 125},
	} {
		if got := execExitCode(c.e); got != c.want {
			t.Errorf("%+v: %d, want %d", c.e, got, c.want)
		}
	}
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }
