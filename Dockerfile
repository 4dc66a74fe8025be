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
RUN cargo build --release --locked -p nodepulse --bin nodepulse \
 && strip target/release/nodepulse \
 && ./target/release/nodepulse --version

FROM scratch
COPY --from=build /src/target/release/nodepulse /usr/local/bin/nodepulse
COPY config/nodepulse.yaml /etc/nodepulse/nodepulse.yaml
# Run as root with no capabilities (see deploy/daemonset.yaml): it reads root-only host files.
USER 0:0
ENTRYPOINT ["/usr/local/bin/nodepulse"]
CMD ["--config=/etc/nodepulse/nodepulse.yaml"]
