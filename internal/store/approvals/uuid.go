package approvals

import (
	"crypto/rand"
	"encoding/hex"
)

// newUUID returns a random (version 4) UUID in its lowercase 8-4-4-4-12 form.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:]) // never returns an error; it crashes the program if randomness fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}

// isUUID reports whether s has the lowercase 8-4-4-4-12 hex form newUUID produces. Only
// such ids are used in file names, so an id can never name a path outside the directory.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}
