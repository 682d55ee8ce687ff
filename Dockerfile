# One Dockerfile for the three images; TARGET picks the program:
#   docker build --build-arg TARGET=cmd/binder -t tether-binder .
#   docker build --build-arg TARGET=cmd/provisioner -t tether-provisioner .
#   docker build --build-arg TARGET=examples/local-driver --build-arg BASE=gcr.io/distroless/static:latest -t tether-local-driver .
# For docker users only: the released images come from `make images`
# (internal/release), which needs no container engine and is what the tests
# run. This file is not exercised by CI.
ARG BASE=gcr.io/distroless/static:nonroot
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGET=cmd/binder
RUN CGO_ENABLED=0 go build -trimpath -ldflags=-s -o /out/app ./${TARGET}

FROM ${BASE}
COPY --from=build /out/app /app
ENTRYPOINT ["/app"]
