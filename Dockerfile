# syntax=docker/dockerfile:1
#
# The mailtarget-operator image: a multi-stage build of the `mailtarget-operator` binary on the
# official Rust image, copied into a distroless runtime (glibc, CA certificates, no shell, no
# package manager) that runs as the non-root user 65532.
#
#   docker build -t mailtarget-operator:0.1.0 .
#   docker build --build-arg RUST_VERSION=1.95 -t mailtarget-operator:dev .
#
# The Helm chart runs it with `args: ["run"]` and a read-only root filesystem; the binary
# writes nothing to disk. CI has no container engine, so this file is not built there:
# tests/chart.rs checks that it builds the right binary and runs as the user the chart expects.

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-slim-bookworm AS builder
WORKDIR /src
# The whole workspace: Cargo needs every member's manifest (tests/apiserver) even though only
# the operator binary is built. .dockerignore keeps target/ and .git/ out of the context.
COPY . .
# Cache mounts keep the registry and build directory between builds (BuildKit).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin mailtarget-operator \
    && install -D -m 0755 target/release/mailtarget-operator /out/mailtarget-operator

FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="mailtarget-operator" \
      org.opencontainers.image.description="Kubernetes operator that makes a Mailtarget email-delivery account declarative" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/mailtarget-operator /usr/local/bin/mailtarget-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mailtarget-operator"]
CMD ["run"]
