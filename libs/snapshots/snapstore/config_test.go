package snapstore_test

import (
	"flag"
	"strings"
	"testing"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
)

// Config registers install with the service's help and the redis-* flags,
// reads them from flags and the environment, and validates both.
func TestConfigFlags(t *testing.T) {
	t.Setenv(platform.EnvName("", "redis-db"), "3")
	c := snapstore.DefaultConfig()
	if c.Install != snapshots.DefaultInstall || c.Redis.DialTimeout != snapstore.NewRedisOptions().DialTimeout {
		t.Fatalf("defaults: %+v", c)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.AddFlags(fs, "install name; the help of this service")
	if f := fs.Lookup("install"); f == nil || !strings.HasPrefix(f.Usage, "install name; the help of this service") {
		t.Fatalf("install flag: %+v", f)
	}
	for _, name := range []string{"redis-addrs", "redis-master-name", "redis-cluster", "redis-password-file", "redis-db", "redis-dial-timeout", "redis-wait-replicas", "redis-wait-timeout"} {
		if fs.Lookup(name) == nil {
			t.Errorf("--%s is not registered", name)
		}
	}
	if err := fs.Parse([]string{"--install", "east", "--redis-addrs", "localhost:6379"}); err != nil {
		t.Fatal(err)
	}
	if c.Install != "east" || c.Redis.Addrs != "localhost:6379" || c.Redis.DB != 3 {
		t.Fatalf("parsed: install %q, addrs %q, db %d", c.Install, c.Redis.Addrs, c.Redis.DB)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid configuration: %v", err)
	}

	c.Install, c.Redis.Addrs = "", "no-port"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--install must not be empty") || !strings.Contains(err.Error(), "--redis-addrs") {
		t.Fatalf("Validate = %v, want the install and the address refused", err)
	}
}

// A bad environment variable fails validation, naming the variable.
func TestConfigEnvironmentError(t *testing.T) {
	t.Setenv(platform.EnvName("", "redis-db"), "three")
	c := snapstore.DefaultConfig()
	c.AddFlags(flag.NewFlagSet("test", flag.ContinueOnError), "install name")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), platform.EnvName("", "redis-db")) {
		t.Fatalf("Validate = %v, want the bad environment variable named", err)
	}
}
