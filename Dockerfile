# syntax=docker/dockerfile:1
# Multi-stage build of the `sluice` worker and the example WASM transform.
#
#   docker build -t sluice .
#   docker run -p 8083:8083 -v $PWD/config:/etc/sluice sluice \
#     standalone /etc/sluice/worker.json /etc/sluice/connector.json
#
# A member of a cluster (docs/distributed.md): the worker config names the
# Kafka cluster, group.id and the config and status topics; give each
# container a stable worker.id or --hostname (the default worker.id is
# HOSTNAME:PORT):
#   docker run -p 8083:8083 -v $PWD/config:/etc/sluice --hostname sluice-0 sluice \
#     distributed /etc/sluice/worker.json
#
# Volumes: /etc/sluice (configs), /opt/sluice/plugins (plugin.path: native
# connector plugins; also a place for your transform components), /var/lib/sluice (offsets, SQLite files, the compiled-WASM
# cache). The example transform is /opt/sluice/transforms/example.wasm; the
# standard transform library is found at /opt/sluice/transforms/.

FROM rust:1.95-bookworm AS build
# librdkafka (bundled, with ssl and zstd) and SQLite build from source.
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential pkg-config zlib1g-dev libssl-dev python3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# rust-toolchain.toml pins the toolchain and the wasm32-wasip2 target.
RUN rustup toolchain install \
 && cargo build --release --locked --bin sluice \
 && cargo build --release --locked --target wasm32-wasip2 \
      --manifest-path examples/transforms/rust/Cargo.toml \
 && cargo build --release --locked --target wasm32-wasip2 \
      --manifest-path plugins/transforms/Cargo.toml

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 zlib1g curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/sluice --create-home sluice \
 && mkdir -p /etc/sluice /opt/sluice/plugins /opt/sluice/transforms \
 && chown sluice:sluice /var/lib/sluice
COPY --from=build /src/target/release/sluice /usr/local/bin/sluice
COPY --from=build /src/examples/transforms/rust/target/wasm32-wasip2/release/sluice_example_transform.wasm \
     /opt/sluice/transforms/example.wasm
COPY --from=build /src/plugins/transforms/target/wasm32-wasip2/release/sluice_transforms.wasm \
     /opt/sluice/transforms/sluice_transforms.wasm
COPY examples/docker/worker.json /etc/sluice/worker.json
VOLUME ["/etc/sluice", "/opt/sluice/plugins", "/var/lib/sluice"]
USER sluice
WORKDIR /var/lib/sluice
EXPOSE 8083
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8083/health || exit 1
ENTRYPOINT ["sluice"]
CMD ["standalone", "/etc/sluice/worker.json"]
