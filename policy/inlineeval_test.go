package policy

import (
	"strings"
	"testing"
)

// TestStrictInlineEvalForms generates, for every interpreter of
// InlineEvalInterpreters, each way its table says it takes inline code —
// every short option alone, in a cluster, with the code attached or as the
// next word; every long option with "=" or a separate word; subcommands;
// module options with code; data: URLs — and the ways every interpreter
// reads a program from standard input (/dev/stdin, /dev/fd/0,
// /proc/self/fd/0, "-"). Each is inline eval under strictInlineEval, at
// the top and under a wrapper; plain scripts are not.
func TestStrictInlineEvalForms(t *testing.T) {
	bins := map[string]string{"python*": "python3.11", "pypy*": "", "node": "node", "nodejs": "", "deno": "deno",
		"bun": "bun", "ruby*": "ruby", "perl*": "perl", "php*": "php", "lua*": "lua5.4", "osascript": ""}
	stdin := []string{"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "/proc/thread-self/fd/0", "//dev//stdin", "../../../../dev/stdin", "-"}
	var cmds []string
	for _, spec := range InlineEvalInterpreters {
		bin := bins[spec.Name]
		if bin == "" {
			continue // not on the fake host
		}
		for _, c := range spec.Short {
			o := string(c)
			cmds = append(cmds, bin+" -"+o+" 'code'", bin+" -"+o+"'code'", bin+" -w"+o+" 'code'", bin+" -"+o+"w 'code'")
		}
		for _, l := range spec.Long {
			cmds = append(cmds, bin+" "+l+" 'code'", bin+" "+l+"='code'")
		}
		for _, s := range spec.Subcommands {
			cmds = append(cmds, bin+" "+s+" 'code'")
		}
		for _, c := range spec.ModuleShort {
			o := string(c)
			for _, v := range []string{"'strict;system(1)'", "'X (1)'", "'X=1;2'", "'X'\\''y'"} {
				cmds = append(cmds, bin+" -"+o+v+" x.pl", bin+" -"+o+" "+v+" x.pl")
			}
		}
		if spec.DataURL {
			cmds = append(cmds, bin+" --import 'data:text/javascript,x'", bin+" --import='data:text/javascript,x'",
				bin+" run 'DATA:application/javascript,x'", bin+" 'data:,x'")
		}
		for _, p := range stdin {
			cmds = append(cmds, bin+" "+p, bin+" -w "+p+" arg")
		}
	}
	for _, c := range cmds {
		for _, cmd := range []string{c, "timeout 5 " + c, "echo x | " + c, "bash -c " + quote(c)} {
			req := stdRequest(cmd)
			req.Allowlist = []AllowEntry{{Pattern: "/usr/bin/*"}}
			req.StrictInlineEval = true
			if d := Evaluate(req); d.Outcome == OutcomeRun {
				t.Errorf("%q runs under strictInlineEval (pinned %s)", cmd, d.Pinned)
			}
		}
	}
	for _, c := range []string{"perl -MJSON x.pl", "perl -M-strict x.pl", "perl -MList::Util=sum,max x.pl", "perl -mJSON::PP x.pl",
		"node app.js", "node --import ./loader.mjs app.js", "deno run app.ts", "php x.php", "python3 dev/x.py", "ruby x.rb"} {
		req := stdRequest(c)
		req.Allowlist = []AllowEntry{{Pattern: "/usr/bin/*"}}
		req.StrictInlineEval = true
		if d := Evaluate(req); d.Outcome != OutcomeRun {
			t.Errorf("%q: %s %s", c, d.Outcome, strings.TrimSpace(d.Reason))
		}
	}
}
