#!/usr/bin/env bash
# generate-proto.sh regenerates the Go code of every .proto file under api/proto with protoc from
# Debian's protobuf-compiler and the plugins pinned in tools/go.mod: protoc-gen-go for every file,
# protoc-gen-go-grpc for sandboxd's own services, protoc-gen-connect-go for the E2B envd services
# under api/proto/envd (served with the Connect protocol). `make generate` calls it. protoc is
# pinned by version (the generated files name it): hack/install-deps.sh installs it; this script
# never installs anything.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

# PROTOC_VERSION is Debian 12's protobuf-compiler 3.21.12-3+deb12u1 (hack/install-deps.sh).
PROTOC_VERSION=3.21.12
have=$(protoc --version 2>/dev/null | awk '{print $2}' || true)
if [[ "$have" != "$PROTOC_VERSION" ]]; then
  echo "generate-proto: need protoc $PROTOC_VERSION, found '${have:-none}'; run hack/install-deps.sh (Debian package protobuf-compiler)" >&2
  exit 1
fi

# protoc finds plugins on PATH; these wrappers run the pinned versions through `go tool`.
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
for plugin in protoc-gen-go protoc-gen-go-grpc protoc-gen-connect-go; do
  printf '#!/bin/sh\nexec go tool -modfile=%q %s "$@"\n' "$repo/tools/go.mod" "$plugin" >"$bin/$plugin"
  chmod +x "$bin/$plugin"
done

mapfile -t grpc_protos < <(cd api/proto && find . -name '*.proto' -not -path './envd/*' -printf '%P\n' | sort)
mapfile -t connect_protos < <(cd api/proto && find envd -name '*.proto' -printf '%p\n' | sort)
PATH="$bin:$PATH" protoc \
  -I api/proto \
  --go_out=api/proto --go_opt=paths=source_relative \
  --go-grpc_out=api/proto --go-grpc_opt=paths=source_relative \
  "${grpc_protos[@]}"
PATH="$bin:$PATH" protoc \
  -I api/proto \
  --go_out=api/proto --go_opt=paths=source_relative \
  --connect-go_out=api/proto --connect-go_opt=paths=source_relative \
  "${connect_protos[@]}"
