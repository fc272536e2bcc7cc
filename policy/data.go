package policy

// The lists below are the policy's data (STYLE rule 14). They are read once,
// when the package is initialised, into private lookup tables: changing them
// at run time has no effect. Per-request changes go through [Request]
// (SafeBins, TrustedDirs, Profiles).

// BlockedWrappers are executables that are never satisfied, by the allowlist
// or by safe bins, whatever their arguments. They are
// matched on the basename of the word as written, of the resolved path and of
// the realpath. The first six come from OpenClaw; the others are conch
// additions (they change the user, root or namespaces of what they run).
var BlockedWrappers = []string{
	"sudo", "doas", "chrt", "ionice", "setsid", "taskset",
	"su", "pkexec", "runuser", "chroot", "nsenter", "unshare",
}

// DispatchWrappers run the command given in their arguments. They are
// unwrapped in the accepted forms, and the inner command is
// judged instead. xargs is a conch addition: it runs its command with
// arguments read from stdin, so its inner command must be satisfied by the
// allowlist (a safe bin would receive unchecked arguments).
var DispatchWrappers = []string{"env", "nice", "nohup", "stdbuf", "timeout", "xargs"}

// TerminalFileWrappers are dispatch wrappers that write a file themselves
// when their standard streams are a terminal: nohup appends the output to
// ./nohup.out (or ~/nohup.out). With [Request].Terminal set they are not
// transparent: the segment is a miss unless the wrapper itself is
// allowlisted.
var TerminalFileWrappers = []string{"nohup"}

// RCShells are shell wrappers that run a startup file of the user for
// every `-c` (zsh reads ~/.zshenv), code the gate never judged; their `-c`
// is only satisfied with the option that skips those files (`zsh -f`),
// listed here per shell.
var RCShells = map[string]string{"zsh": "f"}

// ShellWrappers are the shells whose `-c SCRIPT` is analysed like a command.
// hush (a busybox shell applet) is a conch addition.
var ShellWrappers = []string{"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "hush"}

// Multiplexers are multi-call binaries; with a shell applet (`busybox sh`)
// they are shell wrappers, otherwise they are judged as themselves.
var Multiplexers = []string{"busybox", "toybox"}

// Builtins are shell builtins that are never satisfied when they appear as a
// command name without a slash, even if an executable of that name exists
// on PATH: the shell runs its builtin, not the file. The
// first eleven come from the spec; the rest are conch additions (builtins
// that change the shell's state, run other commands or read input).
var Builtins = []string{
	"cd", "export", "source", ".", "eval", "exec", "set", "alias", "trap", "command", "builtin",
	"unalias", "unset", "shopt", "enable", "hash", "fc", "history", "bind", "ulimit", "umask",
	"read", "mapfile", "readarray", "local", "declare", "typeset", "readonly", "let", "shift",
	"return", "exit", "logout", "wait", "jobs", "fg", "bg", "disown", "suspend", "pushd", "popd",
	"dirs", "caller", "complete", "compgen", "compopt", "getopts", "times", "type", "help",
}

// DefaultSafeBins is the safe-bin list used when [Request].SafeBins is nil.
var DefaultSafeBins = []string{"cut", "uniq", "head", "tail", "tr", "wc"}

// DefaultTrustedDirs are always trusted for safe bins;
// [Request].TrustedDirs adds to them.
var DefaultTrustedDirs = []string{"/bin", "/usr/bin"}

// MultiCallBinaries may be the realpath of a safe bin whose basename differs
// (a coreutils or busybox symlink farm).
var MultiCallBinaries = []string{"coreutils", "busybox", "toybox"}

// InlineEval describes how an interpreter takes inline code.
type InlineEval struct {
	// Name is the basename; a trailing "*" matches any suffix (python3.12).
	Name string
	// Short lists single-letter options that take inline code; they are
	// also found inside clusters (`perl -ne`).
	Short string
	// Long lists long options that take inline code (`--eval`, `--eval=…`).
	Long []string
	// Subcommands lists words that make the interpreter read inline code
	// (`deno eval`).
	Subcommands []string
	// ModuleShort lists single-letter options whose value names a module
	// to load; a value that is not a plain module name is inline code
	// (`perl '-Mstrict;system(1)'` runs `use strict;system(1);`).
	ModuleShort string
	// DataURL: an argument that is a data: URL (or has one after "=") is
	// inline code (`node --import data:text/javascript,…`, `deno run
	// data:…`).
	DataURL bool
}

// InlineEvalInterpreters lists the interpreters checked by strictInlineEval.
// The trailing-star names and ruby*/perl*/php*/lua* widen the spec's list to
// versioned binaries (ruby3.2, php8.2, lua5.4); bun's -p/--print, node's
// clusters, php's -B/-R/-E (code run before, per and after input lines) and
// -a (interactive: code from stdin), perl's -M/-m with code, and data: URLs
// of node, deno and bun are conch additions. Every interpreter whose program
// operand names standard input (/dev/stdin, /dev/fd/N, /proc/self/fd/N)
// counts as inline eval too.
var InlineEvalInterpreters = []InlineEval{
	{Name: "python*", Short: "c"},
	{Name: "pypy*", Short: "c"},
	{Name: "node", Short: "ep", Long: []string{"--eval", "--print"}, DataURL: true},
	{Name: "nodejs", Short: "ep", Long: []string{"--eval", "--print"}, DataURL: true},
	{Name: "deno", Subcommands: []string{"eval"}, DataURL: true},
	{Name: "bun", Short: "ep", Long: []string{"--eval", "--print"}, DataURL: true},
	{Name: "ruby*", Short: "e"},
	{Name: "perl*", Short: "eE", ModuleShort: "Mm"},
	{Name: "php*", Short: "rBREa"},
	{Name: "lua*", Short: "e"},
	{Name: "osascript", Short: "e"},
}

// BuiltinProfiles are the built-in safe-bin profiles. A
// profile only judges options: the tool's command line is parsed with its
// complete [OptionTables] entry, so an abbreviation, an optional argument
// (uniq --group[=METHOD], listed here as a value flag: the value must be
// attached) or a cluster means what it means to the tool. grep,
// sort and jq are profiled but not in [DefaultSafeBins]. For jq, a filter
// mentioning env, $ENV, input_filename, import, include or modulemeta is also rejected
// (whatever profile is used for jq).
var BuiltinProfiles = map[string]Profile{
	"cut": {
		AllowedValueFlags: []string{"-b", "-c", "-f", "-d", "--bytes", "--characters", "--fields", "--delimiter", "--output-delimiter"},
		AllowedBoolFlags:  []string{"-s", "-z", "-n", "--complement", "--only-delimited", "--zero-terminated"},
	},
	"uniq": {
		AllowedValueFlags: []string{"-f", "-s", "-w", "--skip-fields", "--skip-chars", "--check-chars", "--group", "--all-repeated"},
		AllowedBoolFlags:  []string{"-c", "-d", "-D", "-u", "-i", "-z", "--count", "--repeated", "--unique", "--ignore-case", "--zero-terminated"},
	},
	"head": {
		AllowedValueFlags: []string{"-n", "-c", "--lines", "--bytes"},
		AllowedBoolFlags:  []string{"-q", "-v", "-z", "--quiet", "--silent", "--verbose", "--zero-terminated"},
	},
	"tail": {
		AllowedValueFlags: []string{"-n", "-c", "--lines", "--bytes", "--sleep-interval", "--max-unchanged-stats", "--pid"},
		AllowedBoolFlags:  []string{"-q", "-v", "-z", "--quiet", "--silent", "--verbose", "--zero-terminated"},
		// Following never ends: a safe bin must not hang the agent.
		DeniedFlags: []string{"-f", "-F", "--follow", "--retry"},
	},
	"tr": {
		MinPositional:    1,
		MaxPositional:    2,
		AllowedBoolFlags: []string{"-c", "-C", "-d", "-s", "-t", "--complement", "--delete", "--squeeze-repeats", "--truncate-set1"},
	},
	"wc": {
		AllowedBoolFlags: []string{"-c", "-m", "-l", "-w", "-L", "--bytes", "--chars", "--lines", "--words", "--max-line-length"},
		DeniedFlags:      []string{"--files0-from"},
	},
	"grep": {
		AllowedValueFlags: []string{"-e", "-m", "-A", "-B", "-C", "-D", "--regexp", "--max-count", "--after-context", "--before-context", "--context", "--devices", "--binary-files", "--exclude", "--include", "--label"},
		AllowedBoolFlags: []string{"-i", "-v", "-w", "-x", "-c", "-n", "-o", "-q", "-s", "-E", "-F", "-G", "-P", "-z", "-a", "-I", "-h", "-H", "-b",
			"--ignore-case", "--invert-match", "--word-regexp", "--line-regexp", "--count", "--line-number", "--only-matching", "--quiet", "--silent",
			"--no-messages", "--extended-regexp", "--fixed-strings", "--basic-regexp", "--perl-regexp", "--null-data", "--text", "--no-filename",
			"--with-filename", "--byte-offset", "--line-buffered"},
		DeniedFlags: []string{"-f", "-d", "-r", "-R", "--file", "--exclude-from", "--dereference-recursive", "--directories", "--recursive"},
	},
	"sort": {
		AllowedValueFlags: []string{"-k", "-t", "--key", "--field-separator", "--parallel", "--batch-size"},
		AllowedBoolFlags: []string{"-b", "-d", "-f", "-g", "-h", "-i", "-M", "-n", "-r", "-R", "-s", "-u", "-V", "-z", "-c", "-C",
			"--ignore-leading-blanks", "--dictionary-order", "--ignore-case", "--general-numeric-sort", "--human-numeric-sort",
			"--ignore-nonprinting", "--month-sort", "--numeric-sort", "--reverse", "--random-sort", "--stable", "--unique",
			"--version-sort", "--zero-terminated", "--check"},
		// A tiny buffer (-S 1) makes sort write temporary files even for
		// a small input.
		DeniedFlags: []string{"-o", "-T", "-S", "--output", "--compress-program", "--files0-from", "--random-source", "--temporary-directory", "--buffer-size"},
	},
	"jq": {
		MaxPositional:     1,
		AllowedValueFlags: []string{"--indent"},
		AllowedBoolFlags: []string{"-r", "-j", "-c", "-S", "-e", "-n", "-s", "-a", "-C", "-M", "--raw-output", "--join-output",
			"--compact-output", "--sort-keys", "--exit-status", "--null-input", "--slurp", "--tab", "--ascii-output", "--seq"},
		DeniedFlags: []string{"-f", "-L", "--from-file", "--library-path", "--arg", "--argjson", "--args", "--jsonargs", "--argfile", "--rawfile", "--slurpfile"},
	},
}

// jqDeniedFilterWords are rejected anywhere in a jq filter (case-insensitive
// substring: a filter that merely looks like one of them is rejected too).
// modulemeta reads module files from jq's library path, like import.
var jqDeniedFilterWords = []string{"env", "$ENV", "input_filename", "import", "include", "modulemeta"}

// lookup tables, built once from the exported lists.
var (
	blockedSet    = setOf(BlockedWrappers)
	dispatchSet   = setOf(DispatchWrappers)
	termFileSet   = setOf(TerminalFileWrappers)
	rcShells      = copyMap(RCShells)
	shellSet      = setOf(ShellWrappers)
	multiplexSet  = setOf(Multiplexers)
	builtinSet    = setOf(Builtins)
	multiCallSet  = setOf(MultiCallBinaries)
	defaultSafe   = setOf(DefaultSafeBins)
	builtinProfs  = compileProfiles(BuiltinProfiles)
	inlineEvalTab = append([]InlineEval(nil), InlineEvalInterpreters...)
	defaultTrust  = append([]string(nil), DefaultTrustedDirs...)
)

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func setOf(list []string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[s] = true
	}
	return m
}
