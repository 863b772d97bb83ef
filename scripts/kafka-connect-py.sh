#!/usr/bin/env bash
# The third-party Kafka Connect client the compatibility suite drives
# unchanged: kafka-connect-py from PyPI, pinned, in a venv of its own,
# ${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}/kafka-connect-py-venv (python3-venv
# from apt if missing), as scripts/schemathesis.sh installs schemathesis.
#
#   scripts/kafka-connect-py.sh install   install it if missing (scripts/setup.sh)
#   scripts/kafka-connect-py.sh python    install it if missing; print the venv's python
#
# The check itself is tests/compat/kafka_connect_py.py, run by the real-Kafka
# suite (real_kafka::compat_rest) against Apache Kafka Connect and Sluice.
set -euo pipefail
# shellcheck source=scripts/python-venv.sh
source "$(dirname "$0")/python-venv.sh"

PIN="kafka-connect-py==1.0.0"
TOOLS="${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}"
venv="$TOOLS/kafka-connect-py-venv"

log() { echo "kafka-connect-py.sh: $*" >&2; }

install() { pinned_venv "$venv" "$PIN" python kafka-connect-py.sh; }

case "${1:-install}" in
  install) install ;;
  python)
    install
    echo "$venv/bin/python"
    ;;
  *)
    log "unknown command '$1' (usage: kafka-connect-py.sh install|python)"
    exit 2
    ;;
esac
