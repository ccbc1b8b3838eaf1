package snapstore

import (
	"errors"
	"flag"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// Config is the store configuration that registration, ingest,
// translation and distribution share: the install name, which scopes every
// Redis key (and is the value of the managed-by label), and how to reach
// Redis. The services embed it in their own Config, so that cfg.Install and
// cfg.Redis read as before.
type Config struct {
	// Install names the installation; it scopes the Redis keys.
	Install string
	// Redis says how to reach the shared store; no address keeps state in
	// memory.
	Redis RedisOptions

	flags *platform.Flags
}

// DefaultConfig returns the defaults: install snapshots.DefaultInstall and
// the default Redis options (no address).
func DefaultConfig() Config {
	return Config{Install: snapshots.DefaultInstall, Redis: NewRedisOptions()}
}

// AddFlags registers install, with installHelp as its usage (each service
// says what the name selects for it), and the redis-* flags of
// RedisOptions.AddFlags.
func (c *Config) AddFlags(fs *flag.FlagSet, installHelp string) {
	c.flags = platform.NewFlags(fs, "")
	c.flags.String(&c.Install, "install", installHelp)
	c.Redis.AddFlags(fs)
}

// Validate checks the install name (snapshots.ValidateInstall), the Redis
// options, and the environment variables of the flags.
func (c *Config) Validate() error {
	var errs []error
	if c.flags != nil {
		errs = append(errs, c.flags.Err())
	}
	if err := snapshots.ValidateInstall(c.Install); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.Redis.Validate())
	return errors.Join(errs...)
}
