#!/usr/bin/env bash
# Confluent's own Python client (confluent-kafka with its Avro, JSON Schema and Protobuf serializers
# and SchemaRegistryClient) from PyPI, pinned, in a venv of its own,
# ${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}/confluent-py-venv (python3-venv
# from apt if missing).
#
#   scripts/confluent-py.sh install   install it if missing (scripts/setup.sh)
#   scripts/confluent-py.sh python    install it if missing; print the venv's python
#
# tests/schema_registry.rs runs the scripts of tests/schema_registry/ with it
# against the worker's built-in schema registry and the registry converters.
set -euo pipefail
# shellcheck source=scripts/python-venv.sh
source "$(dirname "$0")/python-venv.sh"

PIN="confluent-kafka[avro,json,protobuf,schemaregistry]==2.16.1"
TOOLS="${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}"
venv="$TOOLS/confluent-py-venv"

log() { echo "confluent-py.sh: $*" >&2; }

install() { pinned_venv "$venv" "$PIN" python confluent-py.sh; }

case "${1:-install}" in
  install) install ;;
  python)
    install
    echo "$venv/bin/python"
    ;;
  *)
    log "unknown command '$1' (usage: confluent-py.sh install|python)"
    exit 2
    ;;
esac
