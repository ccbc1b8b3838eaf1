#!/usr/bin/env bash
# Keeps every workspace module's go.mod tidy on its own (GOWORK=off), so that
# each module builds outside the workspace too: every module gets a replace
# for each local module, and `go mod tidy` adds the requires it needs.
#
#   hack/modsync.sh [module-dir ...]   default: every module in go.work
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
all=$(sed -n 's/^\t\.\/\(.*\)$/\1/p' go.work | grep -v '^tools$')
mods=${*:-$all}
for m in $mods; do
  args=()
  for l in $all; do
    [[ "$l" == "$m" ]] && continue
    rel=$(realpath --relative-to="$m" "$l")
    args+=("-replace=github.com/meshplane/meshplane/$l=$rel")
  done
  (cd "$m" && go mod edit "${args[@]}" && GOWORK=off GOFLAGS=-mod=mod go mod tidy)
done
