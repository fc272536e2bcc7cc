package cli

import (
	"encoding/json"
	"fmt"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/store/approvals"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/spf13/cobra"
)

func (a *app) configCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "config",
		Short: "Configuration tools",
	})
	schema := &cobra.Command{
		Use:   "schema [config|approvals]",
		Short: "Print the JSON Schema of config.json (default) or exec-approvals.json",
		Long: `Print the JSON Schema (draft 2020-12) of config.json or of exec-approvals.json, so
that editors validate and complete them. Reads no home and no configuration.`,
		Example:   "  conch config schema > config.schema.json\n  conch config schema approvals",
		Args:      args("[config|approvals]"),
		ValidArgs: []string{"config", "approvals"},
	}
	schema.RunE = a.runs(func(_ *cobra.Command, pos []string) int {
		which := "config"
		if len(pos) == 1 {
			which = pos[0]
		}
		b, err := schemaJSON(which)
		if err != nil {
			fmt.Fprintf(a.stderr, "conch config schema: %v\n", err)
			return ExitUsage
		}
		a.stdout.Write(b)
		return ExitOK
	})
	cmd.AddCommand(schema)
	return cmd
}

// schemaJSON is the text `conch config schema WHICH` prints.
func schemaJSON(which string) ([]byte, error) {
	var s *jsonschema.Schema
	var err error
	switch which {
	case "config":
		s, err = config.Schema()
	case "approvals":
		s, err = approvals.Schema()
	default:
		return nil, fmt.Errorf("unknown schema %q (want config or approvals)", which)
	}
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
