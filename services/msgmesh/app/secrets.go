package app

import (
	"fmt"
	"path/filepath"

	"github.com/msgmesh/msgmesh/platform/keyring"
)

// KeyFileName is the key-encryption key file made in data_dir when no
// key is configured (secrets.key_file, MSGMESH_SECRETS_KEY).
const KeyFileName = "secrets.key"

// loadKeyring builds the keyring sealing the control log's secrets from
// secrets.key or secrets.key_file, else from data_dir/secrets.key (made on
// first start), plus secrets.previous_key_files.
//
// With an external Kafka and no key configured the generated key is only
// on this machine: that works for one node and is logged as a warning,
// since every other node needs a copy (without it a node refuses to start,
// naming the key id it lacks).
func (a *App) loadKeyring() (*keyring.Keyring, error) {
	sc := a.cfg.Secrets
	var cur []byte
	var err error
	switch {
	case sc.Key != "":
		cur, err = keyring.ParseKey([]byte(sc.Key))
		if err != nil {
			return nil, fmt.Errorf("secrets.key: %w", err)
		}
	case sc.KeyFile != "":
		cur, err = keyring.LoadFile(sc.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("secrets.key_file: %w", err)
		}
	default:
		path := filepath.Join(a.cfg.DataDir, KeyFileName)
		var created bool
		cur, created, err = keyring.LoadOrCreateFile(path)
		if err != nil {
			return nil, fmt.Errorf("key-encryption key %s (set secrets.key_file to use another): %w", path, err)
		}
		switch {
		case created && a.cfg.Embedded():
			a.log.Info("generated the key-encryption key of the control log's secrets; back it up with the data directory: without it the token signing keys and webhook secrets cannot be read",
				"file", path, "kek", keyring.KeyID(cur))
		case created:
			a.log.Warn("NO KEY-ENCRYPTION KEY CONFIGURED: generated one in the data directory. Every node of this deployment needs this same key: "+
				"copy the file to each node and set secrets.key_file (MSGMESH_SECRETS_KEY_FILE); a node without it refuses to start",
				"file", path, "kek", keyring.KeyID(cur))
		case !a.cfg.Embedded():
			a.log.Warn("the key-encryption key comes from the data directory, not from configuration: every node needs this same key (set secrets.key_file)",
				"file", path, "kek", keyring.KeyID(cur))
		}
	}
	var prev [][]byte
	for _, f := range sc.PreviousKeyFiles {
		k, err := keyring.LoadFile(f)
		if err != nil {
			return nil, fmt.Errorf("secrets.previous_key_files: %w", err)
		}
		prev = append(prev, k)
	}
	kr, err := keyring.New(cur, prev...)
	if err != nil {
		return nil, err
	}
	a.log.Info("control log secrets are sealed", "kek", kr.KeyID(), "keys", len(kr.IDs()))
	return kr, nil
}
