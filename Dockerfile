# syntax=docker/dockerfile:1
#
# The mailtarget-operator image: a static musl binary of `mailtarget-operator` on
# gcr.io/distroless/static (CA certificates, tzdata and /etc/passwd; no libc, no shell, no package
# manager), running as the non-root user 65532.
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t mailtarget-operator:dev .
#   docker build -t mailtarget-operator:dev .                         # the machine's own platform
#   docker buildx build --platform linux/amd64,linux/arm64 --target binary --output dist .
#
# The last form writes only the binaries (dist/linux_amd64/mailtarget-operator, ...): the release
# workflow (.github/workflows/release.yml) publishes those next to the image, built by the same
# stages. The builder runs on the build machine's platform ($BUILDPLATFORM) and cross-compiles
# for $TARGETARCH with cargo-zigbuild (zig is the C compiler and linker of the musl targets; ring
# has C and assembly), so an arm64 image needs no emulation. The Helm chart runs the image with
# `args: ["run"]` and a read-only root filesystem; the binary writes nothing to disk.
#
# tests/release.rs lints this file with hadolint and checks that the runtime stage is minimal and
# runs as the user the chart's security context names.

# The Rust toolchain the binary is built with: the one the project is tested with.
ARG RUST_VERSION=1.95.0

FROM --platform=$BUILDPLATFORM ghcr.io/rust-cross/cargo-zigbuild:0.22.3 AS builder
ARG RUST_VERSION
RUN rustup toolchain install "${RUST_VERSION}" --profile minimal \
        --target x86_64-unknown-linux-musl,aarch64-unknown-linux-musl
WORKDIR /src
# The whole workspace: Cargo needs every member's manifest (tests/apiserver) even though only
# the operator binary is built. .dockerignore keeps target/ and .git/ out of the context.
COPY . .
ARG TARGETARCH
# Cache mounts keep the registry and build directory between builds (BuildKit); `locked` makes
# the two platforms of one build take turns on the shared build directory.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    case "${TARGETARCH}" in \
        amd64) triple=x86_64-unknown-linux-musl ;; \
        arm64) triple=aarch64-unknown-linux-musl ;; \
        *) echo "unsupported TARGETARCH '${TARGETARCH}': linux/amd64 and linux/arm64 are built" >&2; exit 1 ;; \
    esac \
    && cargo "+${RUST_VERSION}" zigbuild --release --locked --target "${triple}" --bin mailtarget-operator \
    && install -D -m 0755 "target/${triple}/release/mailtarget-operator" /out/mailtarget-operator

# `--target binary --output DIR`: the binary alone, for the release's downloadable archives.
FROM scratch AS binary
COPY --from=builder /out/mailtarget-operator /mailtarget-operator

# The image (the default target: the last stage).
FROM gcr.io/distroless/static:nonroot
LABEL org.opencontainers.image.title="mailtarget-operator" \
      org.opencontainers.image.description="Kubernetes operator that makes a Mailtarget email-delivery account declarative" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/mailtarget-operator /usr/local/bin/mailtarget-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mailtarget-operator"]
CMD ["run"]
