// Package proof checks the policy package's safe bins against the real
// tools: its tests compare each option table with the installed tool's
// --help and option parser, and run every generated safe-bin invocation
// the policy allows under strace (the "execution proof"). It has no code
// outside its tests; they live here because the policy package itself
// never runs a process.
package proof
