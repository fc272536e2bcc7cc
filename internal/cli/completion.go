package cli

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// bashWithoutBashCompletion is appended to cobra's bash script. The script
// splits the command line with _get_comp_words_by_ref, a function of the
// bash-completion package, and fails on every Tab ("command not found")
// where that package is not loaded, as on minimal installs and in
// containers. This replacement keeps the package's function when it is
// there (checked at each Tab, so a .bashrc may load it later) and
// otherwise splits the line up to the cursor at blanks, as the package
// does with -n =: (a "--flag=value" stays one word).
const bashWithoutBashCompletion = `
# conch: complete without the bash-completion package too.
__conch_init_completion()
{
    COMPREPLY=()
    if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
        _get_comp_words_by_ref "$@" cur prev words cword
        return
    fi
    local line="${COMP_LINE:0:COMP_POINT}"
    read -r -a words <<< "$line"
    if [[ ${#words[@]} -eq 0 || $line =~ [[:space:]]$ ]]; then
        words+=("")
    fi
    cword=$(( ${#words[@]} - 1 ))
    cur="${words[cword]}"
    prev=""
    if (( cword > 0 )); then
        prev="${words[cword-1]}"
    fi
}
`

// standaloneBashCompletion makes `conch completion bash` print a script
// that also works without the bash-completion package.
func (a *app) standaloneBashCompletion(root *cobra.Command) {
	bash, _, err := root.Find([]string{"completion", "bash"})
	if err != nil || bash == nil || bash.Name() != "bash" {
		return
	}
	bash.Long = fmt.Sprintf(`Generate the autocompletion script for the bash shell. It works with or without
the bash-completion package.

To load completions in your current shell session:

	source <(%[1]s completion bash)

To load completions for every new session, add that line to ~/.bashrc, or,
where the bash-completion package is installed, write the script once where
that package looks for it:

	%[1]s completion bash > /etc/bash_completion.d/%[1]s
`, root.Name())
	bash.RunE = func(c *cobra.Command, _ []string) error {
		noDesc, _ := c.Flags().GetBool("no-descriptions")
		var buf bytes.Buffer
		if err := c.Root().GenBashCompletionV2(&buf, !noDesc); err != nil {
			return err
		}
		script := buf.String()
		// The replacement goes before the "complete" line, after cobra's
		// own definition of the function.
		at := strings.LastIndex(script, "\nif [[ $(type -t compopt) = \"builtin\" ]]; then")
		if at < 0 {
			at = len(script)
		}
		_, err := fmt.Fprint(a.stdout, script[:at]+"\n"+bashWithoutBashCompletion+script[at:])
		return err
	}
}
