# Builds the Paddock images for users with Docker:
#   docker build --target controller -t paddock-controller .
#   docker build --target router     -t paddock-router .
#   docker build --target sandbox    -t paddock-sandbox .
#   docker build --target snapshot   -t paddock-snapshot .
#   docker build --target egress     -t paddock-egress .
# The local cluster builds the same images without Docker (internal/image).
FROM golang:1.26 AS source
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# Every binary is static and carries the version, as `paddock version` and the build-info metric
# report it.
ENV CGO_ENABLED=0 \
    GOFLAGS=-trimpath \
    LDFLAGS="-s -w -X github.com/paddock-dev/paddock/internal/version.gitVersion=${VERSION}"

# One build stage per binary, so that a target builds only what it ships.
FROM source AS build-controller
RUN go build -ldflags "${LDFLAGS}" -o /out/paddock-controller ./cmd/paddock-controller

FROM source AS build-router
RUN go build -ldflags "${LDFLAGS}" -o /out/paddock-router ./cmd/paddock-router

FROM source AS build-snapshot
RUN go build -ldflags "${LDFLAGS}" -o /out/paddock-snapshot ./cmd/paddock-snapshot

FROM source AS build-egress
RUN go build -ldflags "${LDFLAGS}" -o /out/paddock-egress ./cmd/paddock-egress

FROM source AS build-sandboxd
RUN go build -ldflags "${LDFLAGS}" -o /out/sandboxd ./cmd/sandboxd

# paddock-controller: the controller manager (charts/paddock, dist/paddock.yaml).
FROM gcr.io/distroless/static:nonroot AS controller
COPY --from=build-controller /out/paddock-controller /paddock-controller
USER 65532:65532
ENTRYPOINT ["/paddock-controller"]

# paddock-router: the HTTP entry point to every sandbox (config/router, router.enabled in the chart).
FROM gcr.io/distroless/static:nonroot AS router
COPY --from=build-router /out/paddock-router /paddock-router
USER 65532:65532
ENTRYPOINT ["/paddock-router"]

# sandbox: the default sandbox image, sandboxd (the runtime API the SDK talks to) next to a
# busybox shell for the commands it runs. It keeps busybox's user: a template's securityContext
# decides who runs it.
FROM busybox:1.37-musl AS sandbox
COPY --from=build-sandboxd /out/sandboxd /usr/local/bin/sandboxd
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENTRYPOINT ["/usr/local/bin/sandboxd"]

# paddock-snapshot: the capture and resume Pods of SandboxSnapshots (snapshots.enabled in the
# chart, dist/paddock-snapshots.yaml). It runs as root in privileged Pods: it pauses containers
# through containerd and runs the node's runsc.
FROM gcr.io/distroless/static AS snapshot
COPY --from=build-snapshot /out/paddock-snapshot /paddock-snapshot
ENTRYPOINT ["/paddock-snapshot"]

# paddock-egress: the node component that enforces sandboxes' egress policies (config/egress,
# egress.enabled in the chart). It rewrites the node's iptables, so it carries Debian's iptables
# (nf_tables backend, as the node's own) and runs as root with NET_ADMIN only.
FROM debian:bookworm-slim AS egress
RUN apt-get update && apt-get install -y --no-install-recommends iptables ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build-egress /out/paddock-egress /paddock-egress
ENTRYPOINT ["/paddock-egress"]
