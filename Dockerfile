# Builds the Paddock images for users with Docker:
#   docker build --target controller -t paddock-controller .
#   docker build --target router -t paddock-router .
# The local cluster builds the same images without Docker (internal/image).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/paddock-dev/paddock/internal/version.gitVersion=${VERSION}" \
      -o /out/ ./cmd/paddock-controller ./cmd/paddock-router

FROM gcr.io/distroless/static:nonroot AS controller
COPY --from=build /out/paddock-controller /paddock-controller
USER 65532:65532
ENTRYPOINT ["/paddock-controller"]

FROM gcr.io/distroless/static:nonroot AS router
COPY --from=build /out/paddock-router /paddock-router
USER 65532:65532
EXPOSE 8080 8443 9090 8081
ENTRYPOINT ["/paddock-router"]
