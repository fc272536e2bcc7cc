package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/conchsh/conch/internal/approvals"
	"github.com/conchsh/conch/internal/config"
	"github.com/google/jsonschema-go/jsonschema"
)

const configUsage = "usage: conch config schema [config|approvals]\n"

// runConfig runs `conch config schema [config|approvals]`: it prints the
// JSON Schema of config.json (the default) or of exec-approvals.json. It
// reads no home and no configuration.
func runConfig(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "schema" {
		fmt.Fprint(stderr, configUsage)
		return exitUsage
	}
	fs := flag.NewFlagSet("config schema", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
	}
	which := "config"
	switch fs.NArg() {
	case 0:
	case 1:
		which = fs.Arg(0)
	default:
		fmt.Fprint(stderr, configUsage)
		return exitUsage
	}
	b, err := schemaJSON(which)
	if err != nil {
		fmt.Fprintf(stderr, "conch config schema: %v\n", err)
		return exitUsage
	}
	stdout.Write(b)
	return exitOK
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
