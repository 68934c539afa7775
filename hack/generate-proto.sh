#!/usr/bin/env bash
# generate-proto.sh regenerates the Go code of every .proto file under api/proto with protoc from
# Debian's protobuf-compiler and the plugins pinned in tools/go.mod: protoc-gen-go for every file,
# protoc-gen-go-grpc for sandboxd's own services, protoc-gen-connect-go for the E2B envd services
# under api/proto/envd (served with the Connect protocol). `make generate` calls it; it installs
# protoc when it is missing.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

if ! command -v protoc >/dev/null 2>&1; then
  hack/install-deps.sh protobuf-compiler
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
