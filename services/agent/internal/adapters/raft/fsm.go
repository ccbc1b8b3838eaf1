package raft

import (
	"errors"
	"fmt"
	"io"
	"sync"

	hraft "github.com/hashicorp/raft"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"google.golang.org/protobuf/proto"
)

// Log entry types: the first byte of every entry the agent appends.
const entryEnvoyConfig byte = 1

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

// fsm is the replicated state: the latest EnvoyConfig. Every committed
// entry and every restored snapshot goes to the local sink.
type fsm struct {
	sink app.EnvoyConfigSink

	mu      sync.Mutex
	data    []byte // the latest entry, as appended
	version string
}

func (f *fsm) apply(data []byte) error {
	c, err := decodeEnvoyConfig(data)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.data, f.version = data, c.Version
	f.mu.Unlock()
	if f.sink != nil {
		f.sink.SetEnvoyConfig(c)
	}
	return nil
}

// Apply implements hraft.FSM. An entry it cannot read is skipped: it was
// written by a newer agent, and the next config replaces it.
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

// Snapshot implements hraft.FSM.
func (f *fsm) Snapshot() (hraft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fsmSnapshot(f.data), nil
}

// Restore implements hraft.FSM.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("read raft snapshot: %w", err)
	}
	if len(data) == 0 {
		return nil
	}
	return f.apply(data)
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
