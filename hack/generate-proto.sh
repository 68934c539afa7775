#!/usr/bin/env bash
# generate-proto.sh regenerates the Go code of every .proto file under api/proto with protoc from
# Debian's protobuf-compiler and the protoc-gen-go / protoc-gen-go-grpc plugins pinned in
# tools/go.mod. `make generate` calls it; it installs protoc when it is missing.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

if ! command -v protoc >/dev/null 2>&1; then
  hack/install-deps.sh protobuf-compiler
fi

# protoc finds plugins on PATH; these wrappers run the pinned versions through `go tool`.
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
for plugin in protoc-gen-go protoc-gen-go-grpc; do
  printf '#!/bin/sh\nexec go tool -modfile=%q %s "$@"\n' "$repo/tools/go.mod" "$plugin" >"$bin/$plugin"
  chmod +x "$bin/$plugin"
done

mapfile -t protos < <(cd api/proto && find . -name '*.proto' -printf '%P\n' | sort)
PATH="$bin:$PATH" protoc \
  -I api/proto \
  --go_out=api/proto --go_opt=paths=source_relative \
  --go-grpc_out=api/proto --go-grpc_opt=paths=source_relative \
  "${protos[@]}"
