package apitype

import "strings"

// Error codes of apply_patch failures.
const (
	CodeInvalidPatch = "invalid_patch"
	CodeContext      = "context_not_found"
	CodeOutside      = "path_outside_workspace"
	CodePatchAborted = "aborted"
	CodeForbidden    = "forbidden"
)

// PatchParams are the parameters of the apply_patch tool.
type PatchParams struct {
	// Input is the whole patch, "*** Begin Patch" to "*** End Patch".
	Input string `json:"input"`
}

// ParsePatchParams decodes apply_patch arguments strictly: unknown fields
// are rejected; a missing, empty or all-whitespace input is "Provide a
// patch input." (invalid_patch).
func ParsePatchParams(raw []byte) (PatchParams, *Error) {
	var p PatchParams
	m, err := fields(raw, map[string]bool{"input": true})
	if err != nil {
		return p, err
	}
	if err := decodeString(m, "input", &p.Input); err != nil {
		return p, err
	}
	if strings.TrimSpace(p.Input) == "" {
		return p, Errorf(CodeInvalidPatch, "Provide a patch input.")
	}
	return p, nil
}

// PatchDetails are the details of a successful apply_patch call.
type PatchDetails struct {
	Status  string       `json:"status"` // "completed"
	Summary PatchSummary `json:"summary"`
}

// PatchSummary lists the files a patch added, modified (a move counts as
// its destination) and deleted, in patch order, relative to the workspace
// when inside it.
type PatchSummary struct {
	Added    []string `json:"added"`
	Modified []string `json:"modified"`
	Deleted  []string `json:"deleted"`
}
