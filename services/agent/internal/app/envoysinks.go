package app

// EnvoyConfigSinks hands every EnvoyConfig to each of its sinks in turn:
// one replica's ECDS server and access-log sink.
type EnvoyConfigSinks []EnvoyConfigSink

var _ EnvoyConfigSink = EnvoyConfigSinks(nil)

// SetEnvoyConfig implements EnvoyConfigSink.
func (s EnvoyConfigSinks) SetEnvoyConfig(c EnvoyConfig) {
	for _, sink := range s {
		sink.SetEnvoyConfig(c)
	}
}
