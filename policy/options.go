package policy

// ArgKind says whether a command-line option takes an argument.
type ArgKind uint8

// The argument kinds of GNU getopt_long.
const (
	// NoArg: the option takes no argument (`--count`, `-c`); `--count=x`
	// is an error of the tool.
	NoArg ArgKind = iota
	// RequiredArg: the argument is the rest of the word (`-n5`,
	// `--lines=5`) or else the next word, whatever it is (`-n -`).
	RequiredArg
	// OptionalArg: the argument is only the rest of the word
	// (`--group=append`, `-xARG`); the next word is never consumed.
	// `--help` shows these as `--name[=ARG]`.
	OptionalArg
)

func (k ArgKind) String() string {
	switch k {
	case NoArg:
		return "no argument"
	case RequiredArg:
		return "a required argument"
	case OptionalArg:
		return "an optional argument (only with =)"
	}
	return "ArgKind(" + string(rune('0'+k)) + ")"
}

// Grammar names the command-line parser of a tool.
type Grammar uint8

const (
	// GetoptLong is GNU getopt_long with argument permutation: options
	// and operands mix freely; `--` ends options; `-` and the empty word
	// are operands; long options may be abbreviated to a unique prefix
	// (aliases of one option count once); clusters `-abc` read left to
	// right.
	GetoptLong Grammar = iota
	// JQ is jq's own parser: a word is an option when it starts with "--"
	// or with "-" and a letter; long options must be spelled in full and
	// take no `=value`; short clusters read left to right; `--` ends
	// options; every other word (`-`, `''`, `-1`) is an operand, the
	// first one being the filter.
	JQ
)

// Option is one option of a tool. Short and Long name the same option;
// either may be empty.
type Option struct {
	// Short is the single-character name without "-" ("n"), or "".
	Short string
	// Long is the long name without "--" ("lines"), or "".
	Long string
	// Alias names the canonical long name of the option this entry is
	// another spelling of: grep --colour is --color (getopt does not call
	// a prefix of both ambiguous), tail -f is --follow without its
	// optional argument. Denying one name denies every spelling.
	Alias string
	// Arg is the argument kind.
	Arg ArgKind
	// Words is the number of following words a jq option consumes
	// (`--arg NAME VALUE` takes 2); 0 means 1 for RequiredArg.
	Words int
	// Hidden options are accepted by the tool but not listed by --help
	// (found by probing the tool's option parser).
	Hidden bool
	// Since is the version of the tool that added the option; "" means
	// every version conch knows. Options newer than the installed tool
	// are not expected in its --help.
	Since string
}

// OptionTable is the complete command line of a tool: every option it
// accepts, including the ones no profile allows, so that abbreviations
// resolve the way the tool resolves them.
type OptionTable struct {
	Grammar Grammar
	Options []Option
	// ObsoleteCount: a first word `-<digits>` is a count (`head -5`); a
	// first word of the obsolete form `-[NUM][bcl][f]` (`tail -cf`) is
	// refused, because the tool reads it as one option, not as a cluster.
	ObsoleteCount bool
	// DigitOptions: each digit is a short option without argument
	// (`grep -5` is a context of 5, `uniq -3` skips 3 fields).
	DigitOptions bool
}

func opt(short, long string, arg ArgKind) Option {
	return Option{Short: short, Long: long, Arg: arg}
}

func hidden(o Option) Option { o.Hidden = true; return o }

func since(v string, o Option) Option { o.Since = v; return o }

func alias(long, of string, arg ArgKind) Option {
	return Option{Long: long, Alias: of, Arg: arg}
}

var helpVersion = []Option{opt("", "help", NoArg), opt("", "version", NoArg)}

func withHelp(o ...Option) []Option { return append(o, helpVersion...) }

// OptionTables are the command lines of the profiled tools (GNU coreutils
// 9.x, GNU grep 3.x, jq 1.6–1.7). A test checks each table against the
// installed tool's --help and option parser, so an option added by a new
// release fails the build until it is listed here.
var OptionTables = map[string]OptionTable{
	"cut": {Options: withHelp(
		opt("b", "bytes", RequiredArg),
		opt("c", "characters", RequiredArg),
		opt("d", "delimiter", RequiredArg),
		opt("f", "fields", RequiredArg),
		opt("n", "", NoArg),
		opt("", "complement", NoArg),
		opt("s", "only-delimited", NoArg),
		opt("", "output-delimiter", RequiredArg),
		opt("z", "zero-terminated", NoArg),
	)},
	"uniq": {DigitOptions: true, Options: withHelp(
		opt("c", "count", NoArg),
		opt("d", "repeated", NoArg),
		opt("D", "", NoArg),
		opt("", "all-repeated", OptionalArg),
		opt("f", "skip-fields", RequiredArg),
		opt("", "group", OptionalArg),
		opt("i", "ignore-case", NoArg),
		opt("s", "skip-chars", RequiredArg),
		opt("u", "unique", NoArg),
		opt("z", "zero-terminated", NoArg),
		opt("w", "check-chars", RequiredArg),
	)},
	"head": {ObsoleteCount: true, Options: withHelp(
		opt("c", "bytes", RequiredArg),
		opt("n", "lines", RequiredArg),
		opt("q", "quiet", NoArg),
		opt("q", "silent", NoArg),
		opt("v", "verbose", NoArg),
		opt("z", "zero-terminated", NoArg),
		hidden(opt("", "-presume-input-pipe", NoArg)),
	)},
	"tail": {ObsoleteCount: true, Options: withHelp(
		opt("c", "bytes", RequiredArg),
		Option{Short: "f", Alias: "follow"}, // -f takes no argument, --follow an optional one
		opt("", "follow", OptionalArg),
		opt("F", "", NoArg),
		opt("n", "lines", RequiredArg),
		opt("", "max-unchanged-stats", RequiredArg),
		opt("", "pid", RequiredArg),
		opt("q", "quiet", NoArg),
		opt("q", "silent", NoArg),
		opt("", "retry", NoArg),
		opt("s", "sleep-interval", RequiredArg),
		opt("v", "verbose", NoArg),
		opt("z", "zero-terminated", NoArg),
		hidden(opt("", "-presume-input-pipe", NoArg)),
		hidden(opt("", "-disable-inotify", NoArg)),
	)},
	"tr": {Options: withHelp(
		opt("c", "complement", NoArg),
		opt("C", "", NoArg),
		opt("d", "delete", NoArg),
		opt("s", "squeeze-repeats", NoArg),
		opt("t", "truncate-set1", NoArg),
	)},
	"wc": {Options: withHelp(
		opt("c", "bytes", NoArg),
		opt("m", "chars", NoArg),
		opt("l", "lines", NoArg),
		opt("", "files0-from", RequiredArg),
		opt("L", "max-line-length", NoArg),
		opt("w", "words", NoArg),
		since("9.2", opt("", "total", RequiredArg)),
		hidden(opt("", "debug", NoArg)),
	)},
	"grep": {DigitOptions: true, Options: []Option{
		opt("E", "extended-regexp", NoArg),
		opt("F", "fixed-strings", NoArg),
		hidden(opt("F", "fixed-regexp", NoArg)),
		opt("G", "basic-regexp", NoArg),
		opt("P", "perl-regexp", NoArg),
		opt("e", "regexp", RequiredArg),
		opt("f", "file", RequiredArg),
		opt("i", "ignore-case", NoArg),
		hidden(opt("y", "", NoArg)),
		opt("", "no-ignore-case", NoArg),
		opt("w", "word-regexp", NoArg),
		opt("x", "line-regexp", NoArg),
		opt("z", "null-data", NoArg),
		opt("s", "no-messages", NoArg),
		opt("v", "invert-match", NoArg),
		opt("V", "version", NoArg),
		opt("", "help", NoArg),
		opt("m", "max-count", RequiredArg),
		opt("b", "byte-offset", NoArg),
		opt("n", "line-number", NoArg),
		opt("", "line-buffered", NoArg),
		opt("H", "with-filename", NoArg),
		opt("h", "no-filename", NoArg),
		opt("", "label", RequiredArg),
		opt("o", "only-matching", NoArg),
		opt("q", "quiet", NoArg),
		opt("q", "silent", NoArg),
		opt("", "binary-files", RequiredArg),
		opt("a", "text", NoArg),
		opt("I", "", NoArg),
		opt("d", "directories", RequiredArg),
		opt("D", "devices", RequiredArg),
		opt("r", "recursive", NoArg),
		opt("R", "dereference-recursive", NoArg),
		opt("", "include", RequiredArg),
		opt("", "exclude", RequiredArg),
		opt("", "exclude-from", RequiredArg),
		opt("", "exclude-dir", RequiredArg),
		opt("L", "files-without-match", NoArg),
		opt("l", "files-with-matches", NoArg),
		opt("c", "count", NoArg),
		opt("T", "initial-tab", NoArg),
		opt("Z", "null", NoArg),
		opt("B", "before-context", RequiredArg),
		opt("A", "after-context", RequiredArg),
		opt("C", "context", RequiredArg),
		opt("", "group-separator", RequiredArg),
		opt("", "no-group-separator", NoArg),
		opt("", "color", OptionalArg),
		alias("colour", "color", OptionalArg),
		opt("U", "binary", NoArg),
		hidden(opt("u", "unix-byte-offsets", NoArg)),
		hidden(opt("X", "", RequiredArg)),
	}},
	"sort": {Options: withHelp(
		opt("b", "ignore-leading-blanks", NoArg),
		opt("d", "dictionary-order", NoArg),
		opt("f", "ignore-case", NoArg),
		opt("g", "general-numeric-sort", NoArg),
		opt("i", "ignore-nonprinting", NoArg),
		opt("M", "month-sort", NoArg),
		opt("h", "human-numeric-sort", NoArg),
		opt("n", "numeric-sort", NoArg),
		opt("R", "random-sort", NoArg),
		opt("", "random-source", RequiredArg),
		opt("r", "reverse", NoArg),
		opt("", "sort", RequiredArg),
		opt("V", "version-sort", NoArg),
		opt("", "batch-size", RequiredArg),
		Option{Short: "c", Alias: "check"}, // -c takes no argument, --check an optional one
		opt("", "check", OptionalArg),
		opt("C", "", NoArg),
		opt("", "compress-program", RequiredArg),
		opt("", "debug", NoArg),
		opt("", "files0-from", RequiredArg),
		opt("k", "key", RequiredArg),
		opt("m", "merge", NoArg),
		opt("o", "output", RequiredArg),
		opt("s", "stable", NoArg),
		opt("S", "buffer-size", RequiredArg),
		opt("t", "field-separator", RequiredArg),
		opt("T", "temporary-directory", RequiredArg),
		opt("", "parallel", RequiredArg),
		opt("u", "unique", NoArg),
		opt("z", "zero-terminated", NoArg),
		hidden(opt("y", "", RequiredArg)),
	)},
	"jq": {Grammar: JQ, Options: []Option{
		opt("s", "slurp", NoArg),
		opt("r", "raw-output", NoArg),
		since("1.7", opt("", "raw-output0", NoArg)),
		opt("j", "join-output", NoArg),
		opt("a", "ascii-output", NoArg),
		opt("c", "compact-output", NoArg),
		opt("C", "color-output", NoArg),
		opt("M", "monochrome-output", NoArg),
		opt("S", "sort-keys", NoArg),
		opt("R", "raw-input", NoArg),
		opt("n", "null-input", NoArg),
		opt("f", "from-file", NoArg), // the filter operand names a file
		opt("L", "library-path", RequiredArg),
		opt("e", "exit-status", NoArg),
		opt("h", "help", NoArg),
		opt("V", "version", NoArg),
		opt("", "tab", NoArg),
		opt("", "indent", RequiredArg),
		opt("", "unbuffered", NoArg),
		opt("", "seq", NoArg),
		opt("", "stream", NoArg),
		opt("", "stream-errors", NoArg),
		opt("", "args", NoArg),
		opt("", "jsonargs", NoArg),
		{Long: "arg", Arg: RequiredArg, Words: 2},
		{Long: "argjson", Arg: RequiredArg, Words: 2},
		{Long: "slurpfile", Arg: RequiredArg, Words: 2},
		{Long: "rawfile", Arg: RequiredArg, Words: 2},
		{Long: "argfile", Arg: RequiredArg, Words: 2},
		opt("", "run-tests", NoArg), // the remaining words are test files
		opt("", "debug-dump-disasm", NoArg),
		opt("", "debug-trace", NoArg),
		since("1.7", opt("", "debug-trace=all", NoArg)),
		since("1.7", opt("b", "binary", NoArg)),
		since("1.7", opt("0", "nul-output", NoArg)),
		since("1.7", opt("", "build-configuration", NoArg)),
	}},
}
