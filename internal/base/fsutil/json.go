package fsutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"regexp"
)

// Checksummed JSON: the format of conch's state files (a session's
// meta.json, exit.json and state.json, the idempotency store, the node
// store). Each is indented JSON whose last member is the CRC-32C of the
// rest, so a reader tells a file cut short or with a changed byte from a
// good one (ReadJSON reports ErrDamaged) instead of trusting it.

// WriteJSON replaces path atomically with v as checksummed JSON: mode
// 0600, written to a temporary file renamed over path (Write), so a reader
// (in any process, also after this one crashed) sees either the old or
// the new content. It does not fsync: see WriteJSONDurable and Persist for
// the files that must also survive a machine crash.
func WriteJSON(path string, v any) error { return writeJSON(path, v, false) }

// WriteJSONDurable is WriteJSON followed by fsyncs of the file and its
// directory before the rename is reported.
func WriteJSONDurable(path string, v any) error { return writeJSON(path, v, true) }

// CreateJSON writes v to path, which must not exist, in place: for the
// first record of a directory nobody reads before it is complete (a torn
// file can only mean the writer died before it went on). It saves the
// rename of WriteJSON. On failure path is removed.
func CreateJSON(path string, v any) error {
	b, err := encodeJSON(v)
	if err != nil {
		return err
	}
	return writeNew(path, b)
}

// Persist fsyncs an already written file and its directory.
func Persist(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	f.Close()
	SyncDir(filepath.Dir(path))
	return err
}

func writeJSON(path string, v any, durable bool) error {
	b, err := encodeJSON(v)
	if err != nil {
		return err
	}
	return Write(path, b, Options{Perm: 0o600, NoSync: !durable})
}

// writeNew writes b to path, which must not exist, opened with mode 0600
// and O_EXCL; on failure path is removed.
func writeNew(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// ErrDamaged marks a state file that exists but cannot be trusted: cut
// short, not JSON, or its checksum does not match.
var ErrDamaged = errors.New("file damaged")

// checksumKey is the last member of every JSON object the writers here
// write: the CRC-32C of the file's text without it (see encodeJSON).
const checksumKey = `"crc32c": "`

// encodeJSON returns v as indented JSON and a newline. An object gets a
// last member "crc32c": the CRC-32C (Castagnoli, 8 hex digits) of the
// indented object without that member, so a reader can tell a file cut
// short or with a changed byte from a good one. Any other value (a list)
// is written as the member listKey of such an object, which ReadJSON
// unwraps. A file without the checksum member (written by an earlier
// conch) is still read; only a damage that breaks its JSON shows then.
func encodeJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		if b, err = json.MarshalIndent(map[string]json.RawMessage{listKey: b}, "", "  "); err != nil {
			return nil, err
		}
	}
	sum := fmt.Sprintf("%08x", crc32.Checksum(b, crcTable))
	out := make([]byte, 0, len(b)+32)
	if string(b) == "{}" {
		out = append(out, "{\n  "...)
	} else {
		out = append(out, b[:len(b)-2]...) // drop "\n}"
		out = append(out, ",\n  "...)
	}
	out = append(out, checksumKey...)
	out = append(out, sum...)
	return append(out, "\"\n}\n"...), nil
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// listKey holds a value that is not an object in a checksummed file.
const listKey = "conchList"

// checksumLine matches the last line of a checksummed object whatever its
// key's bytes, so that a changed byte in the key is caught too rather than
// turning the file into one without a checksum.
var checksumLine = regexp.MustCompile(`(?s)\A(.*)(,\n  |\{\n  )"([^\n]{6})": "([^\n]{8})"\n\}\n\z`)

// verifyJSON checks b as written by encodeJSON and returns the JSON text
// without the checksum member. ok is false for a checksum that does not
// match; a text without one is returned as it is.
func verifyJSON(b []byte) (text []byte, ok bool) {
	m := checksumLine.FindSubmatch(b)
	if m == nil {
		if bytes.Contains(b, []byte(checksumKey)) {
			return nil, false // cut short or changed around the member
		}
		return b, true
	}
	var orig []byte
	if string(m[2]) == "{\n  " {
		if len(m[1]) > 0 {
			return nil, false
		}
		orig = []byte("{}")
	} else {
		orig = append(append([]byte(nil), m[1]...), "\n}"...)
	}
	if `"`+string(m[3])+`": "` != checksumKey {
		return nil, false
	}
	return orig, fmt.Sprintf("%08x", crc32.Checksum(orig, crcTable)) == string(m[4])
}

// ReadJSON reads a file written by WriteJSON or CreateJSON into v. A
// missing file is reported with an error wrapping fs.ErrNotExist; a file
// cut short, not JSON, or whose checksum does not match, with one wrapping
// ErrDamaged (v may then be partly filled).
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text, ok := verifyJSON(b)
	if !ok {
		return fmt.Errorf("%s: checksum mismatch: %w", filepath.Base(path), ErrDamaged)
	}
	if !json.Valid(text) {
		return fmt.Errorf("%s: not valid JSON (%d bytes): %w", filepath.Base(path), len(b), ErrDamaged)
	}
	if len(text) > 0 && text[0] == '{' && bytes.Contains(text, []byte(`"`+listKey+`"`)) {
		var w map[string]json.RawMessage
		if json.Unmarshal(text, &w) == nil && len(w) == 1 && w[listKey] != nil {
			text = w[listKey]
		}
	}
	if err := json.Unmarshal(text, v); err != nil {
		return fmt.Errorf("decode %s: %v: %w", filepath.Base(path), err, ErrDamaged)
	}
	return nil
}
