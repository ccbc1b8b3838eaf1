package platform

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  int64
		found bool
	}{
		{"v2 own cgroup", fstest.MapFS{
			"proc/self/cgroup":                          {Data: []byte("0::/kubepods/pod1/c1\n")},
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": {Data: []byte("536870912\n")},
		}, 536870912, true},
		{"v2 namespaced root", fstest.MapFS{
			"proc/self/cgroup":         {Data: []byte("0::/\n")},
			"sys/fs/cgroup/memory.max": {Data: []byte("268435456\n")},
		}, 268435456, true},
		{"v2 no limit", fstest.MapFS{
			"proc/self/cgroup":         {Data: []byte("0::/\n")},
			"sys/fs/cgroup/memory.max": {Data: []byte("max\n")},
		}, 0, false},
		{"v1", fstest.MapFS{
			"proc/self/cgroup": {Data: []byte("5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n")},
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": {Data: []byte("209715200\n")},
		}, 209715200, true},
		{"v1 no limit", fstest.MapFS{
			"proc/self/cgroup":                           {Data: []byte("4:memory:/\n")},
			"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("9223372036854771712\n")},
		}, 0, false},
		{"no cgroup", fstest.MapFS{}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := cgroupMemoryLimit(tc.files, "/proc/self/cgroup")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || found != tc.found {
				t.Errorf("got %d %v, want %d %v", got, found, tc.want, tc.found)
			}
		})
	}
}

func TestCgroupMemoryLimitBadValue(t *testing.T) {
	_, _, err := cgroupMemoryLimit(fstest.MapFS{
		"proc/self/cgroup":         {Data: []byte("0::/\n")},
		"sys/fs/cgroup/memory.max": {Data: []byte("lots\n")},
	}, "/proc/self/cgroup")
	if err == nil || !strings.Contains(err.Error(), "sys/fs/cgroup/memory.max") || !strings.Contains(err.Error(), `"lots"`) {
		t.Fatalf("got %v, want an error naming the file and the value", err)
	}
}

func TestSoftMemoryLimitPercent(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	if _, _, err := SoftMemoryLimit(150); err == nil || !strings.Contains(err.Error(), "between 0 and 100, not 150") {
		t.Errorf("a percent above 100: got %v", err)
	}
	if limit, reason, err := SoftMemoryLimit(0); err != nil || limit != 0 || reason != "off" {
		t.Errorf("percent 0: got %d %q %v", limit, reason, err)
	}
	t.Setenv("GOMEMLIMIT", "150MiB")
	if limit, reason, err := SoftMemoryLimit(90); err != nil || limit != 0 || !strings.Contains(reason, "GOMEMLIMIT=150MiB") {
		t.Errorf("with GOMEMLIMIT: got %d %q %v", limit, reason, err)
	}
}
