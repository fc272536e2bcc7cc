// Package policy decides whether a shell command may run on an execution host
// without a human approval (docs/policy.md).
//
// The package is pure: it parses the command text with mvdan.cc/sh/v3/syntax
// (bash variant), never executes or expands anything, and touches the
// filesystem only to resolve executables through [Env] (stat and realpath).
// It does not import os/exec and does not log.
//
// The entry points are:
//
//   - [Analyze] parses a command and checks that it only uses the accepted
//     shapes: chains of pipelines of simple commands whose first word is
//     literal. Everything else fails closed with a reason such as
//     "unsupported shell construct: redirection (>)".
//   - [Evaluate] applies the security × ask matrix on top of the
//     analysis, resolution of every segment, dispatch and shell wrapper
//     unwrapping, allowlist globs, safe-bin profiles
//     and strictInlineEval. An auto-allowed command in allowlist mode is
//     pinned: its executables are replaced by absolute paths.
//   - [Decision.Explain] renders the `conch policy explain` tree.
//   - [MatchGlob] is the allowlist glob (case-sensitive);
//     [MatchGlobFold] the same for hosts whose file system folds case.
//
// The rule that governs every choice in this package: when the analyser
// cannot tell what a command will do, the command is a miss (a prompt, or a
// denial with ask=off), never a pass.
//
// The lists that grow — blocked wrappers, builtins, shells, interpreters and
// safe-bin profiles — are data: see [BlockedWrappers], [DispatchWrappers],
// [ShellWrappers], [Builtins], [InlineEvalInterpreters] and [BuiltinProfiles].
// A safe bin's arguments are parsed with the tool's complete command line,
// [OptionTables], before its profile judges them.
// They are read once, when the package is initialised; per-request changes
// go through [Request] (SafeBins, TrustedDirs, Profiles).
//
// All functions are safe for concurrent use.
package policy
