package sandbox

import "testing"

// TestGitProgramKeys: the keys whose value git documents as a command it
// runs are classified program (imap.tunnel, run through the shell by git
// imap-send, was plain).
func TestGitProgramKeys(t *testing.T) {
	for _, k := range []string{"imap.tunnel", "core.fsmonitor", "core.sshCommand", "core.pager", "core.editor",
		"core.askPass", "core.gitProxy", "credential.helper", "diff.external", "diff.x.textconv", "diff.x.command",
		"filter.x.process", "filter.x.clean", "filter.x.smudge", "merge.x.driver", "gpg.program", "gpg.ssh.program",
		"gpg.ssh.defaultKeyCommand", "sequence.editor", "interactive.diffFilter", "sendemail.sendmailCmd",
		"sendemail.toCmd", "sendemail.ccCmd", "uploadpack.packObjectsHook", "remote.o.uploadpack", "remote.o.receivepack",
		"mergetool.x.cmd", "difftool.x.cmd", "web.browser", "browser.x.cmd", "man.x.cmd", "guitool.x.cmd"} {
		if c := GitKeyClass(k); c != ClassProgram {
			t.Errorf("%s: class %s, want program", k, c)
		}
	}
}
