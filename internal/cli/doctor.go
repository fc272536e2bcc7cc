package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/conchsh/conch/engine"
	"github.com/spf13/cobra"
)

func (a *app) doctorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor [--json] [--fix]",
		Short: "Audit the home, the policy and the machine (exit 1 on warnings)",
		Long: `Audit the home (permissions, configuration, disk), the policy (ungated agents,
unprofiled safe bins) and the machine (sandbox backends). Exit 1 when a finding
is a warning or an error. Works on the home's files; no engine needed.`,
		Example: "  conch doctor\n  conch doctor --fix\n  conch doctor --json",
		Args:    args(),
	}
	home := homeFlag(cmd.Flags())
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	fix := cmd.Flags().Bool("fix", false, "apply the safe fixes (home permissions, empty profiles for unprofiled safe bins), then report")
	cmd.RunE = a.runs(func(*cobra.Command, []string) int {
		return doctor(*home, *asJSON, *fix, a.stdout, a.stderr)
	})
	return cmd
}

func doctor(home string, asJSON, fix bool, stdout, stderr io.Writer) int {
	if fix {
		done, err := engine.DoctorFix(home)
		for _, d := range done {
			fmt.Fprintf(stderr, "fixed %s\n", d)
		}
		if err != nil {
			fmt.Fprintf(stderr, "conch doctor --fix: %v\n", err)
			return ExitFailed
		}
	}
	findings := engine.Doctor(home)
	bad := false
	for _, f := range findings {
		if f.Level != "info" {
			bad = true
		}
	}
	if asJSON {
		if findings == nil {
			findings = []engine.Finding{}
		}
		json.NewEncoder(stdout).Encode(findings)
	} else if len(findings) == 0 {
		fmt.Fprintln(stdout, "No findings.")
	} else {
		for _, f := range findings {
			fmt.Fprintf(stdout, "%-5s %s: %s\n", f.Level, f.ID, f.Message)
		}
	}
	if bad {
		return ExitFailed
	}
	return ExitOK
}
