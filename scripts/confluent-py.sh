#!/usr/bin/env bash
# Confluent's own Python client (confluent-kafka with its Avro serializers
# and SchemaRegistryClient) from PyPI, pinned, in a venv of its own,
# ${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}/confluent-py-venv (python3-venv
# from apt if missing).
#
#   scripts/confluent-py.sh install   install it if missing (scripts/setup.sh)
#   scripts/confluent-py.sh python    install it if missing; print the venv's python
#
# tests/schema_registry.rs runs tests/schema_registry/confluent_avro.py with
# it against the worker's built-in schema registry and Avro converter.
set -euo pipefail

PIN="confluent-kafka[avro,schemaregistry]==2.16.1"
TOOLS="${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}"
venv="$TOOLS/confluent-py-venv"

log() { echo "confluent-py.sh: $*" >&2; }

install() {
  if [[ -x "$venv/bin/python" && "$(cat "$venv/.pins" 2>/dev/null)" == "$PIN" ]]; then
    return
  fi
  if ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed"; then
    log "installing python3-venv"
    SUDO=""
    [[ "$(id -u)" == 0 ]] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  log "installing $PIN into $venv"
  mkdir -p "$TOOLS"
  python3 -m venv --clear "$venv"
  if ! "$venv/bin/pip" install -q --disable-pip-version-check "$PIN" >&2; then
    log "could not install $PIN from PyPI"
    exit 1
  fi
  echo "$PIN" >"$venv/.pins"
}

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
