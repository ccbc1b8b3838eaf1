#!/usr/bin/env bash
# Builds and caches the binaries the tests and the demo need that do not come
# from apt: kube-apiserver and kubectl (from tools/kube, outside go.work),
# istiod's pilot-discovery (from tools/istiod, outside go.work),
# meshplane-istio-validate, Istio's own validation for `meshctl render
# --validate` (from tools/istiovalidate, outside go.work),
# helm (go install, for the chart tests), the npm packages of clients/ts
# (npm ci: protoc-gen-es and Connect-ES), Debian's chromium for the console's
# browser tests, and checks that the Debian packages
# are present. Idempotent: a warm cache makes
# this a few stat calls.
#
#   hack/tools.sh                  build what is missing
#   hack/tools.sh --demo           only what `make demo` runs: redis-server,
#                                  etcd, kube-apiserver and kubectl (no
#                                  node/npm, helm or istiod)
#   hack/tools.sh --demo --istiod  the same and istiod, for
#                                  `make demo ISTIOD=on`
#   hack/tools.sh --print          print the cache dir
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=v1.32.3
helm_version=v3.22.0
cache=${MESHPLANE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/meshplane/tools}
bindir="$cache/k8s-$k8s_version"

demo_only=false
demo_istiod=false
for arg in "$@"; do
  case "$arg" in
    --print) echo "$bindir"; exit 0 ;;
    --demo) demo_only=true ;;
    --istiod) demo_istiod=true ;;
    *) echo "hack/tools.sh: unknown argument $arg (want --demo, --istiod or --print)" >&2; exit 2 ;;
  esac
done

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v etcd >/dev/null 2>&1 || [[ -x /usr/bin/etcd ]] || need_apt+=(etcd-server)
# Node runs buf's TypeScript plugin (protoc-gen-es) and the TypeScript
# client test; Debian's nodejs (18 or later) is enough.
if ! $demo_only; then
  command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
  command -v npm >/dev/null 2>&1 || need_apt+=(npm)
  # Debian's Chromium runs the console's browser tests (chromedp drives it
  # headless); nothing is downloaded at test time.
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
fi
if ((${#need_apt[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "missing: ${need_apt[*]}; install them with: sudo apt-get install -y ${need_apt[*]}" >&2
    exit 1
  fi
  echo "installing ${need_apt[*]} with apt" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
  # Debian starts the packaged daemons; the tests start their own.
  systemctl stop redis-server etcd >/dev/null 2>&1 || true
fi

mkdir -p "$bindir"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=32"
for cmd in kube-apiserver kubectl; do
  if [[ ! -x "$bindir/$cmd" ]]; then
    echo "building $cmd $k8s_version into $bindir (several minutes on a cold cache)" >&2
    (cd "$root/tools/kube" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bindir/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd")
    mv "$bindir/$cmd.tmp" "$bindir/$cmd"
  fi
done

# istiod (pilot-discovery) for the Istio-in-the-loop tests
# (libs/kube/istiotest) and the demo's --istiod, from tools/istiod (outside
# go.work), into the same directory; a stamp file records the version, so a
# bump rebuilds it. The first build takes about 20 minutes of CPU; the
# binary is about 190 MB.
build_istiod() {
  local istio_version
  istio_version=$(sed -n 's/^require istio.io\/istio \(.*\)$/\1/p' "$root/tools/istiod/go.mod")
  if [[ ! -x "$bindir/pilot-discovery" || "$(cat "$bindir/pilot-discovery.version" 2>/dev/null)" != "$istio_version" ]]; then
    echo "building pilot-discovery (istio.io/istio $istio_version) into $bindir (about 20 minutes of CPU on a cold cache)" >&2
    (cd "$root/tools/istiod" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bindir/pilot-discovery.tmp" istio.io/istio/pilot/cmd/pilot-discovery)
    mv "$bindir/pilot-discovery.tmp" "$bindir/pilot-discovery"
    echo "$istio_version" > "$bindir/pilot-discovery.version"
  fi
}

if $demo_only; then
  if $demo_istiod; then
    build_istiod
  fi
  exit 0
fi

# helm goes into the same directory, so the tests find every tool in one place.
# A stamp file records the version, so a version bump rebuilds it.
if [[ ! -x "$bindir/helm" || "$(cat "$bindir/helm.version" 2>/dev/null)" != "$helm_version" ]]; then
  echo "installing helm $helm_version into $bindir (about a minute on a cold cache)" >&2
  tmpbin=$(mktemp -d)
  trap 'rm -rf "$tmpbin"' EXIT
  (cd "$tmpbin" && GOWORK=off GOBIN="$tmpbin" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$helm_version")
  mv "$tmpbin/helm" "$bindir/helm"
  echo "$helm_version" > "$bindir/helm.version"
fi

build_istiod

# meshplane-istio-validate (tools/istiovalidate, outside go.work), which
# `meshctl render --validate` runs and the meshctl tests use, into the same
# directory. It is built with pilot-discovery's flags, so that the two
# share the build cache of istio.io/istio. A stamp of its sources' hash
# rebuilds it when they change.
validate_dir="$root/tools/istiovalidate"
validate_sum=$(cd "$validate_dir" && find . -name '*.go' ! -name '*_test.go' -print0 | sort -z | xargs -0 cat go.mod go.sum | sha256sum | cut -d' ' -f1)
if [[ ! -x "$bindir/meshplane-istio-validate" || "$(cat "$bindir/meshplane-istio-validate.version" 2>/dev/null)" != "$validate_sum" ]]; then
  echo "building meshplane-istio-validate into $bindir (a few minutes after pilot-discovery, longer on a cold cache)" >&2
  (cd "$validate_dir" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bindir/meshplane-istio-validate.tmp" ./cmd/meshplane-istio-validate)
  mv "$bindir/meshplane-istio-validate.tmp" "$bindir/meshplane-istio-validate"
  echo "$validate_sum" > "$bindir/meshplane-istio-validate.version"
fi

# clients/ts: buf's TypeScript plugin and the Connect-ES runtime, pinned by
# package-lock.json. A stamp of the lock file's hash skips a current install.
ts="$root/clients/ts"
lock_sum=$(sha256sum "$ts/package-lock.json" | cut -d' ' -f1)
if [[ "$(cat "$ts/node_modules/.meshplane-lock.sha256" 2>/dev/null)" != "$lock_sum" ]]; then
  echo "installing the npm packages of clients/ts (npm ci)" >&2
  (cd "$ts" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  echo "$lock_sum" > "$ts/node_modules/.meshplane-lock.sha256"
fi
