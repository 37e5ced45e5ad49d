// Package keyring holds MsgMesh's key-encryption keys (KEKs): the keys
// that encrypt the secrets written to the control log (token signing
// seeds, webhook secrets), so that reading the control topic reveals
// none of them. A KEK never enters Kafka: it comes from a file or the
// environment (secrets.key_file, MSGMESH_SECRETS_KEY).
//
// Secrets are sealed with XChaCha20-Poly1305 (golang.org/x/crypto): a
// random 24-byte nonce per secret, the caller's additional data bound into
// the tag (so a ciphertext moved to another secret's place does not
// open). One key is current (it seals); older ones may be kept to open
// what they sealed while it is re-wrapped (secrets.previous_key_files).
//
// A key is 32 random bytes, written as base64 (standard or URL alphabet,
// padded or not) or 64 hex digits; surrounding whitespace is ignored. Its
// id, "kek_" + 16 hex digits, is derived from the key (a SHA-256 of it
// under a fixed label): it names the key in events and errors and reveals
// nothing usable about it.
package keyring

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"
)

// KeySize is the size of a key-encryption key in bytes.
const KeySize = chacha20poly1305.KeySize

// Errors of Unwrap; match with errors.Is.
var (
	// ErrUnknownKey: the secret was sealed under a key this keyring does
	// not hold. Configure it (secrets.key_file or
	// secrets.previous_key_files).
	ErrUnknownKey = errors.New("key-encryption key not configured")
	// ErrDecrypt: the ciphertext does not open under its key with this
	// additional data (tampered, truncated or moved to another secret).
	ErrDecrypt = errors.New("secret does not decrypt")
)

// Keyring seals under its current key and opens under any key it holds.
// Safe for concurrent use.
type Keyring struct {
	current string
	keys    map[string][]byte
}

// New returns a keyring whose current key is current (it seals), also
// opening what previous keys sealed.
func New(current []byte, previous ...[]byte) (*Keyring, error) {
	k := &Keyring{keys: map[string][]byte{}}
	for i, key := range append([][]byte{current}, previous...) {
		if len(key) != KeySize {
			return nil, fmt.Errorf("keyring: key %d is %d bytes, want %d", i, len(key), KeySize)
		}
		id := KeyID(key)
		if i == 0 {
			k.current = id
		}
		k.keys[id] = bytes.Clone(key)
	}
	return k, nil
}

// KeyID is the id of key: "kek_" + the first 8 bytes (hex) of SHA-256
// over a fixed label and the key.
func KeyID(key []byte) string {
	h := sha256.New()
	h.Write([]byte("msgmesh key-encryption key id\x00"))
	h.Write(key)
	return "kek_" + hex.EncodeToString(h.Sum(nil)[:8])
}

// KeyID is the current key's id (the one Wrap seals under).
func (k *Keyring) KeyID() string { return k.current }

// Has reports whether the keyring holds key id.
func (k *Keyring) Has(id string) bool { _, ok := k.keys[id]; return ok }

// IDs lists the ids of every key held, the current one first.
func (k *Keyring) IDs() []string {
	out := []string{k.current}
	for id := range k.keys {
		if id != k.current {
			out = append(out, id)
		}
	}
	return out
}

// Wrap seals plaintext bound to aad under the current key. It returns the
// key's id and nonce || ciphertext || tag.
func (k *Keyring) Wrap(_ context.Context, plaintext, aad []byte) (string, []byte, error) {
	aead, err := chacha20poly1305.NewX(k.keys[k.current])
	if err != nil {
		return "", nil, fmt.Errorf("keyring: %w", err)
	}
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return "", nil, fmt.Errorf("keyring: random nonce: %w", err)
	}
	return k.current, aead.Seal(out, out, plaintext, aad), nil
}

// Unwrap opens what Wrap sealed under key id with aad. Errors wrap
// ErrUnknownKey or ErrDecrypt.
func (k *Keyring) Unwrap(_ context.Context, id string, ciphertext, aad []byte) ([]byte, error) {
	key, ok := k.keys[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownKey, id)
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	if len(ciphertext) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: under %s: too short", ErrDecrypt, id)
	}
	n := aead.NonceSize()
	pt, err := aead.Open(nil, ciphertext[:n], ciphertext[n:], aad)
	if err != nil {
		return nil, fmt.Errorf("%w: under %s", ErrDecrypt, id)
	}
	return pt, nil
}

// ParseKey decodes a key written as base64 (standard or URL alphabet,
// padded or not) or hex; it must be KeySize bytes.
func ParseKey(text []byte) ([]byte, error) {
	s := strings.TrimSpace(string(text))
	if s == "" {
		return nil, errors.New("empty key")
	}
	if len(s) == 2*KeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("key is %d bytes, want %d (32 random bytes as base64 or hex)", len(b), KeySize)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("key is neither base64 nor hex of %d bytes", KeySize)
}

// LoadFile reads a key from path.
func LoadFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}

// NewKey returns a fresh random key and its text form (base64, standard
// alphabet, padded).
func NewKey() ([]byte, string, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, "", fmt.Errorf("keyring: random: %w", err)
	}
	return key, base64.StdEncoding.EncodeToString(key), nil
}

// LoadOrCreateFile reads the key at path, or when the file does not exist
// makes a fresh one there (mode 0600, its directory 0700 if missing) and
// reports created. It never overwrites an existing file.
func LoadOrCreateFile(path string) (key []byte, created bool, err error) {
	key, err = LoadFile(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return key, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, err
	}
	key, text, err := NewKey()
	if err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		key, err = LoadFile(path) // another process made it first
		return key, false, err
	}
	if err != nil {
		return nil, false, err
	}
	if _, err := f.WriteString(text + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return nil, false, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, false, err
	}
	return key, true, f.Close()
}
