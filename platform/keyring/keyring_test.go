package keyring

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWrapUnwrap(t *testing.T) {
	ctx := context.Background()
	k1, _, _ := NewKey()
	k2, _, _ := NewKey()
	old, err := New(k1)
	if err != nil {
		t.Fatal(err)
	}
	id, ct, err := old.Wrap(ctx, []byte("seed bytes"), []byte("ctx-a"))
	if err != nil || id != KeyID(k1) || id != old.KeyID() {
		t.Fatalf("wrap: %s %v", id, err)
	}
	if bytes.Contains(ct, []byte("seed bytes")) {
		t.Fatal("ciphertext holds the plaintext")
	}
	_, ct2, _ := old.Wrap(ctx, []byte("seed bytes"), []byte("ctx-a"))
	if bytes.Equal(ct, ct2) {
		t.Fatal("two seals alike: the nonce is not random")
	}
	if pt, err := old.Unwrap(ctx, id, ct, []byte("ctx-a")); err != nil || string(pt) != "seed bytes" {
		t.Fatalf("unwrap: %q %v", pt, err)
	}
	if _, err := old.Unwrap(ctx, id, ct, []byte("ctx-b")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("other additional data: %v", err)
	}
	bad := bytes.Clone(ct)
	bad[len(bad)-1] ^= 1
	if _, err := old.Unwrap(ctx, id, bad, []byte("ctx-a")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("tampered: %v", err)
	}
	if _, err := old.Unwrap(ctx, id, ct[:10], []byte("ctx-a")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("truncated: %v", err)
	}
	// Rotation: the new keyring seals under k2 and still opens k1's.
	rot, _ := New(k2, k1)
	if rot.KeyID() != KeyID(k2) || !rot.Has(id) || len(rot.IDs()) != 2 {
		t.Fatalf("rotated keyring: %v", rot.IDs())
	}
	if pt, err := rot.Unwrap(ctx, id, ct, []byte("ctx-a")); err != nil || string(pt) != "seed bytes" {
		t.Fatalf("previous key: %q %v", pt, err)
	}
	only2, _ := New(k2)
	if _, err := only2.Unwrap(ctx, id, ct, []byte("ctx-a")); !errors.Is(err, ErrUnknownKey) || !bytes.Contains([]byte(err.Error()), []byte(id)) {
		t.Fatalf("missing key: %v", err)
	}
	if _, err := New(k1[:16]); err == nil {
		t.Fatal("short key accepted")
	}
}

func TestParseKey(t *testing.T) {
	k, text, _ := NewKey()
	for _, s := range []string{text, " " + text + "\n", base64.RawStdEncoding.EncodeToString(k), base64.URLEncoding.EncodeToString(k), base64.RawURLEncoding.EncodeToString(k), hex.EncodeToString(k)} {
		got, err := ParseKey([]byte(s))
		if err != nil || !bytes.Equal(got, k) {
			t.Errorf("ParseKey(%q): %v", s, err)
		}
	}
	for _, s := range []string{"", "short", base64.StdEncoding.EncodeToString(k[:31]), "zz" + hex.EncodeToString(k)[2:]} {
		if _, err := ParseKey([]byte(s)); err == nil {
			t.Errorf("ParseKey(%q) accepted", s)
		}
	}
}

func TestLoadOrCreateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "secrets.key")
	k, created, err := LoadOrCreateFile(path)
	if err != nil || !created || len(k) != KeySize {
		t.Fatalf("create: %v %v", created, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
	again, created, err := LoadOrCreateFile(path)
	if err != nil || created || !bytes.Equal(again, k) {
		t.Fatalf("second start made another key: %v %v", created, err)
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateFile(path); err == nil {
		t.Fatal("a broken key file was replaced or accepted")
	}
}
