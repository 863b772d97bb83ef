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

PIN="kafka-connect-py==1.0.0"
TOOLS="${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}"
venv="$TOOLS/kafka-connect-py-venv"

log() { echo "kafka-connect-py.sh: $*" >&2; }

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
    log "unknown command '$1' (usage: kafka-connect-py.sh install|python)"
    exit 2
    ;;
esac
