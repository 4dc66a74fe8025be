# nodepulse as a static (musl) binary in an otherwise empty image.
#   docker build -t <registry>/nodepulse:0.1.0 .
# The image holds the binary and the default configuration; deploy/daemonset.yaml mounts the
# real configuration over /etc/nodepulse and the host paths it reads.

# Alpine's Rust targets musl, whose binaries are static by default (crt-static), so the result
# runs in `scratch`. Any stable toolchain at or above the workspace's rust-version (1.89) will do.
FROM rust:1-alpine AS build
# ring (rustls' crypto) compiles C and assembly.
RUN apk add --no-cache musl-dev gcc
WORKDIR /src
COPY . .
# The node's build: the `ship` profile (whole-program LTO), without the `standalone` feature (no
# API emulator, no fleet simulator).
RUN cargo build --profile ship --locked --no-default-features -p nodepulse --bin nodepulse \
 && strip target/ship/nodepulse \
 && ./target/ship/nodepulse --version

FROM scratch
COPY --from=build /src/target/ship/nodepulse /usr/local/bin/nodepulse
COPY config/nodepulse.yaml /etc/nodepulse/nodepulse.yaml
# Run as root with no capabilities (see deploy/daemonset.yaml): it reads root-only host files.
USER 0:0
ENTRYPOINT ["/usr/local/bin/nodepulse"]
CMD ["--config=/etc/nodepulse/nodepulse.yaml"]
