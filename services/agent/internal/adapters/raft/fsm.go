package raft

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	hraft "github.com/hashicorp/raft"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"google.golang.org/protobuf/proto"
)

// Log entry types: the first byte of every entry the agent appends.
const (
	entryEnvoyConfig byte = 1
	entryCredentials byte = 2
)

// encodeEnvoyConfig encodes c as an OutputSnapshot that holds only the
// version, the Wasm filters and the access-log policies.
func encodeEnvoyConfig(c app.EnvoyConfig) ([]byte, error) {
	b, err := proto.Marshal(&snapshotv1.OutputSnapshot{Version: c.Version, WasmFilters: c.WasmFilters, AccessLogPolicies: c.AccessLogPolicies})
	if err != nil {
		return nil, fmt.Errorf("encode envoy config: %w", err)
	}
	return append([]byte{entryEnvoyConfig}, b...), nil
}

func decodeEnvoyConfig(data []byte) (app.EnvoyConfig, error) {
	if len(data) == 0 || data[0] != entryEnvoyConfig {
		return app.EnvoyConfig{}, errors.New("not an envoy config entry")
	}
	var s snapshotv1.OutputSnapshot
	if err := proto.Unmarshal(data[1:], &s); err != nil {
		return app.EnvoyConfig{}, fmt.Errorf("decode envoy config: %w", err)
	}
	return app.EnvoyConfigFromOutput(&s), nil
}

// CredentialsSink receives the agent's credentials on every replica.
type CredentialsSink interface {
	SetCredentials(app.Credentials) error
}

// encryptCredentials seals c with AES-256-GCM under key: the private key
// never crosses the Raft port or rests in the log in the clear.
func encryptCredentials(key []byte, c app.Credentials) ([]byte, error) {
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	plain, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := append([]byte{entryCredentials}, nonce...)
	return gcm.Seal(out, nonce, plain, []byte{entryCredentials}), nil
}

func decryptCredentials(key, data []byte) (app.Credentials, error) {
	gcm, err := newGCM(key)
	if err != nil {
		return app.Credentials{}, err
	}
	if len(data) < 1+gcm.NonceSize() || data[0] != entryCredentials {
		return app.Credentials{}, errors.New("not a credentials entry")
	}
	nonce, sealed := data[1:1+gcm.NonceSize()], data[1+gcm.NonceSize():]
	plain, err := gcm.Open(nil, nonce, sealed, []byte{entryCredentials})
	if err != nil {
		return app.Credentials{}, errors.New("credentials entry sealed with another key (another bootstrap token?)")
	}
	var c app.Credentials
	if err := json.Unmarshal(plain, &c); err != nil {
		return app.Credentials{}, fmt.Errorf("decode credentials: %w", err)
	}
	return c, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, errors.New("the credentials key must be 32 bytes")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// fsm is the replicated state: the latest entry of each type. Every
// committed entry and every restored snapshot goes to the local sinks.
type fsm struct {
	sink  app.EnvoyConfigSink
	creds CredentialsSink
	key   []byte
	log   *slog.Logger

	mu      sync.Mutex
	latest  map[byte][]byte
	version string
}

func (f *fsm) apply(data []byte) error {
	if len(data) == 0 {
		return errors.New("empty entry")
	}
	switch data[0] {
	case entryEnvoyConfig:
		c, err := decodeEnvoyConfig(data)
		if err != nil {
			return err
		}
		f.mu.Lock()
		f.latest[data[0]], f.version = data, c.Version
		f.mu.Unlock()
		if f.sink != nil {
			f.sink.SetEnvoyConfig(c)
		}
	case entryCredentials:
		f.mu.Lock()
		f.latest[data[0]] = data
		f.mu.Unlock()
		if f.creds == nil || f.key == nil {
			return nil
		}
		c, err := decryptCredentials(f.key, data)
		if err != nil {
			f.log.Warn("raft: replicated agent credentials not usable here", "error", err)
			return err
		}
		if err := f.creds.SetCredentials(c); err != nil {
			f.log.Warn("raft: storing replicated agent credentials failed", "error", err)
			return err
		}
	default:
		// Written by a newer agent: the next entry of a known type replaces
		// what it meant.
		return fmt.Errorf("unknown entry type %d", data[0])
	}
	return nil
}

// Apply implements hraft.FSM.
func (f *fsm) Apply(l *hraft.Log) any {
	if l.Type != hraft.LogCommand {
		return nil
	}
	return f.apply(l.Data)
}

func (f *fsm) Version() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version
}

// Snapshot implements hraft.FSM: the latest entry of each type, each
// prefixed with its length.
func (f *fsm) Snapshot() (hraft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b bytes.Buffer
	for _, t := range []byte{entryEnvoyConfig, entryCredentials} {
		if e := f.latest[t]; e != nil {
			b.Write(binary.AppendUvarint(nil, uint64(len(e))))
			b.Write(e)
		}
	}
	return fsmSnapshot(b.Bytes()), nil
}

// Restore implements hraft.FSM.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("read raft snapshot: %w", err)
	}
	r := bytes.NewReader(data)
	for r.Len() > 0 {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return errors.New("raft snapshot is truncated")
		}
		e := make([]byte, n)
		io.ReadFull(r, e)
		// An entry the sinks refuse is logged there; the rest still
		// restores.
		f.apply(e)
	}
	return nil
}

type fsmSnapshot []byte

func (s fsmSnapshot) Persist(sink hraft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (fsmSnapshot) Release() {}
