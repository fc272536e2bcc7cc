package ledger

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/conchsh/conch/internal/base/fsutil"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// KeyFile is the name, in a conch home, of the ledger's Ed25519 signing key (PKCS #8,
// PEM, mode 0600). [Open] creates it when it is missing.
const KeyFile = "ledger.key"

// maxKey bounds the size of the key file LoadKey reads (a PEM Ed25519 key is 119 bytes).
const maxKey = 64 << 10

// pubPrefix starts the text form of a public key: "ed25519:" and the key in standard
// base64.
const pubPrefix = "ed25519:"

// ErrBadSignature is wrapped by the errors of [ParseCheckpoint] users and reported by
// [Verify] when a checkpoint's signature does not verify.
var ErrBadSignature = errors.New("signature does not verify")

// KeyPath returns the path of the signing key of a conch home.
func KeyPath(home string) string { return filepath.Join(home, KeyFile) }

// LoadKey reads the signing key of a conch home. A missing key gives fs.ErrNotExist.
func LoadKey(home string) (ed25519.PrivateKey, error) {
	// A symlink is followed (the key may live elsewhere), a FIFO or device refused.
	data, err := readSmall(KeyPath(home), 0, maxKey)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: not a PEM private key", KeyPath(home))
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyPath(home), err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 key", KeyPath(home))
	}
	return ek, nil
}

// ensureKey loads the home's signing key, creating it (0600) when it is missing. Two
// processes creating it at once agree on one key: the file appears whole, by link(2),
// and whoever loses the race loads the winner's. created reports whether this call made
// it.
func ensureKey(home string) (key ed25519.PrivateKey, created bool, err error) {
	key, err = LoadKey(home)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, false, err
	}
	err = fsutil.CreateFile(KeyPath(home), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	if errors.Is(err, fs.ErrExist) {
		key, err = LoadKey(home)
		return key, false, err
	} else if err != nil {
		return nil, false, err
	}
	return priv, true, nil
}

// EnsureKey returns the public key of a home's ledger, creating the signing key when it
// is missing (and signing the current HEAD with it, like [Open]).
func EnsureKey(home string) (ed25519.PublicKey, error) {
	l, err := Open(home, Options{})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	if l.keyErr != nil {
		return nil, l.keyErr
	}
	return l.key.Public().(ed25519.PublicKey), nil
}

// FormatPublicKey returns the text form of a public key: "ed25519:<base64>".
func FormatPublicKey(pub ed25519.PublicKey) string {
	return pubPrefix + base64.StdEncoding.EncodeToString(pub)
}

// ParsePublicKey parses the text form of [FormatPublicKey] (surrounding space ignored).
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(s), pubPrefix)
	if !ok {
		return nil, fmt.Errorf("public key %q: want %s<base64>", s, pubPrefix)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key %q: not a base64 Ed25519 key", s)
	}
	return ed25519.PublicKey(b), nil
}

// Checkpoint is a signed statement that the ledger's record Seq has hash Hash, made at
// TS. Its text form, printed by `conch ledger verify` and forwarded to syslog, is
// "<seq>:<hash>:<unix ms>:<signature, base64url>"; "<seq>:<hash>" alone is an unsigned
// checkpoint (it still proves the record is there, but not who said so).
type Checkpoint struct {
	Seq  int64
	Hash string
	TS   time.Time // UTC, millisecond precision; zero for an unsigned checkpoint
	Sig  []byte    // Ed25519 over [Checkpoint.Message]; nil when unsigned
}

// Message returns the bytes a checkpoint's signature covers.
func (c Checkpoint) Message() []byte {
	return fmt.Appendf(nil, "conch-ledger-checkpoint v1 %d %s %d", c.Seq, c.Hash, c.TS.UnixMilli())
}

func signCheckpoint(key ed25519.PrivateKey, seq int64, hash string, ts time.Time) Checkpoint {
	c := Checkpoint{Seq: seq, Hash: hash, TS: ts.UTC().Truncate(time.Millisecond)}
	c.Sig = ed25519.Sign(key, c.Message())
	return c
}

// Valid reports whether c is signed by pub.
func (c Checkpoint) Valid(pub ed25519.PublicKey) bool {
	return c.Sig != nil && len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, c.Message(), c.Sig)
}

// String returns the text form of c.
func (c Checkpoint) String() string {
	if c.Sig == nil {
		return fmt.Sprintf("%d:%s", c.Seq, c.Hash)
	}
	return fmt.Sprintf("%d:%s:%d:%s", c.Seq, c.Hash, c.TS.UnixMilli(), base64.RawURLEncoding.EncodeToString(c.Sig))
}

// ParseCheckpoint parses the text form of a checkpoint (see [Checkpoint]). A line copied
// from syslog ("… checkpoint <text>") is accepted too: the last word counts.
func ParseCheckpoint(s string) (Checkpoint, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return Checkpoint{}, errors.New("checkpoint: empty")
	}
	text := fields[len(fields)-1]
	bad := func(why string) (Checkpoint, error) {
		return Checkpoint{}, fmt.Errorf("checkpoint %q: %s (want SEQ:HASH or SEQ:HASH:MS:SIG)", text, why)
	}
	parts := strings.Split(text, ":")
	if len(parts) != 2 && len(parts) != 4 {
		return bad("wrong number of fields")
	}
	seq, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || seq < 1 {
		return bad("bad seq")
	}
	if !isHash(parts[1]) {
		return bad("bad hash")
	}
	c := Checkpoint{Seq: seq, Hash: parts[1]}
	if len(parts) == 4 {
		ms, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			return bad("bad time")
		}
		sig, err := base64.RawURLEncoding.DecodeString(parts[3])
		if err != nil || len(sig) != ed25519.SignatureSize {
			return bad("bad signature")
		}
		c.TS, c.Sig = time.UnixMilli(ms).UTC(), sig
	}
	return c, nil
}
