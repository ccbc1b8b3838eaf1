# syntax=docker/dockerfile:1.7
#
# The release image of every Meshplane binary, chosen by the BINARY build
# arg. Build from the repository root (the Go workspace needs every
# module), one image per binary:
#
#   V=$(git describe --tags --always --dirty)
#   docker build --build-arg BINARY=registration --build-arg VERSION=$V -t ghcr.io/meshplane/registration:dev .
#   docker build --build-arg BINARY=ingest       --build-arg VERSION=$V -t ghcr.io/meshplane/ingest:dev .
#   docker build --build-arg BINARY=translation  --build-arg VERSION=$V -t ghcr.io/meshplane/translation:dev .
#   docker build --build-arg BINARY=distribution --build-arg VERSION=$V -t ghcr.io/meshplane/distribution:dev .
#   docker build --build-arg BINARY=agent        --build-arg VERSION=$V -t ghcr.io/meshplane/agent:dev .
#   docker build --build-arg BINARY=console      --build-arg VERSION=$V -t ghcr.io/meshplane/console:dev .
#   docker build --build-arg BINARY=meshplane    --build-arg VERSION=$V -t ghcr.io/meshplane/meshplane:dev .
#   docker build --build-arg BINARY=meshctl      --build-arg VERSION=$V -t ghcr.io/meshplane/meshctl:dev .
#
# The package built is ./services/<BINARY>/cmd/<BINARY> (the six services)
# or else ./cmd/<BINARY> (meshplane, meshctl); PACKAGE overrides it.
#
# Multi-stage: a static (CGO_ENABLED=0) binary built with the module and
# build caches mounted, then distroless static, non-root. The binary is
# /app in every image, because ENTRYPOINT does not expand build args (and
# distroless has no shell to do it). The Tilt dev loop builds on the host
# instead and uses tilt/Dockerfile.tilt. TestDockerfiles (tools/archtest)
# checks that this file keeps to this.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG BINARY
ARG PACKAGE
ARG VERSION=dev
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
RUN --mount=type=bind,target=/src \
    --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    set -eu; \
    test -n "${BINARY:-}" || { echo "--build-arg BINARY=<name> is required" >&2; exit 1; }; \
    pkg="${PACKAGE:-}"; \
    if [ -z "$pkg" ]; then \
      if [ -d "services/${BINARY}/cmd/${BINARY}" ]; then pkg="./services/${BINARY}/cmd/${BINARY}"; else pkg="./cmd/${BINARY}"; fi; \
    fi; \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} GOFLAGS=-mod=readonly \
    go build -trimpath \
      -ldflags "-s -w -X github.com/meshplane/meshplane/libs/platform.Version=${VERSION}" \
      -o /out/app "$pkg"

FROM gcr.io/distroless/static-debian12:nonroot
ARG BINARY
LABEL org.opencontainers.image.source="https://github.com/meshplane/meshplane" \
      org.opencontainers.image.title="meshplane-${BINARY}"
COPY --from=build /out/app /app
USER 65532:65532
ENTRYPOINT ["/app"]
