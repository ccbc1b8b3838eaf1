package platform

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// SoftMemoryLimit sets the Go runtime's soft memory limit
// (debug.SetMemoryLimit) to percent of the memory limit of the process's
// container, from its cgroup, unless GOMEMLIMIT is set (the runtime then
// took it at start) or percent is 0. Without a soft limit
// the heap grows to twice what was live at the last collection before the
// next one, so a process whose live heap is a third of its container's
// limit can be killed for a burst of garbage; with one, the collector
// runs more often as the heap nears it. It returns the limit set, 0 when
// none was, and says why in reason.
func SoftMemoryLimit(percent int) (limit int64, reason string, err error) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		return 0, "GOMEMLIMIT=" + v + " is set", nil
	}
	if percent == 0 {
		return 0, "off", nil
	}
	if percent < 0 || percent > 100 {
		return 0, "", fmt.Errorf("the percent of the container's memory limit must be between 0 and 100, not %d", percent)
	}
	total, found, err := cgroupMemoryLimit(os.DirFS("/"), "/proc/self/cgroup")
	if err != nil {
		return 0, "", err
	}
	if !found {
		return 0, "no container memory limit", nil
	}
	limit = total / 100 * int64(percent)
	debug.SetMemoryLimit(limit)
	return limit, fmt.Sprintf("%d%% of the container's memory limit of %d bytes", percent, total), nil
}

// cgroupMemoryLimit reads the memory limit of the process's cgroup from
// fsys (the root file system): cgroup v2's memory.max, or v1's
// memory.limit_in_bytes, at the path /proc/self/cgroup names, or at the
// cgroup root where a container sees its own cgroup. found is false when
// there is no limit.
func cgroupMemoryLimit(fsys fs.FS, selfCgroup string) (limit int64, found bool, err error) {
	var v2, v1 string
	if b, err := fs.ReadFile(fsys, strings.TrimPrefix(selfCgroup, "/")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			// hierarchy-ID:controllers:path
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				v2 = parts[2]
			case hasController(parts[1], "memory"):
				v1 = parts[2]
			}
		}
	}
	var candidates []string
	if v2 != "" {
		candidates = append(candidates, filepath.Join("sys/fs/cgroup", v2, "memory.max"))
	}
	candidates = append(candidates, "sys/fs/cgroup/memory.max")
	if v1 != "" {
		candidates = append(candidates, filepath.Join("sys/fs/cgroup/memory", v1, "memory.limit_in_bytes"))
	}
	candidates = append(candidates, "sys/fs/cgroup/memory/memory.limit_in_bytes")
	for _, path := range candidates {
		b, err := fs.ReadFile(fsys, path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("read the cgroup's memory limit: %w", err)
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("the cgroup's memory limit %s: %q is not a number of bytes", path, s)
		}
		// cgroup v1 says "no limit" with the largest page-aligned int64.
		if n <= 0 || n >= math.MaxInt64&^(1<<16-1) {
			return 0, false, nil
		}
		return n, true, nil
	}
	return 0, false, nil
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}
