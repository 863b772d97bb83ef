#!/usr/bin/env bash
# What the web console's browser test (tests/console.rs) needs: Debian's
# chromium, and playwright-core and typescript from npm, pinned by
# tests/console/package-lock.json and installed with `npm ci` into
# ${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}/console/node_modules (outside
# the clone). scripts/setup.sh runs it; safe to run again (it installs only
# what is missing or changed). Skip with SLUICE_SETUP_CONSOLE=0 in setup.sh.
#
#   scripts/console-tests.sh install   install (what setup.sh runs)
#   scripts/console-tests.sh path      print the node_modules directory
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS="${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}"
dir="$TOOLS/console"

log() { echo "console-tests.sh: $*" >&2; }

install() {
  local missing=()
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  # Text in the screenshots: a font chromium can always find.
  dpkg-query -W -f='${Status}' fonts-dejavu-core 2>/dev/null | grep -q "install ok installed" || missing+=(fonts-dejavu-core)
  command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    SUDO=""
    [[ "$(id -u)" == 0 ]] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # npm ci again only when the lock file changed.
  if cmp -s tests/console/package-lock.json "$dir/package-lock.json" && [[ -d "$dir/node_modules/playwright-core" ]]; then
    return
  fi
  log "installing tests/console/package-lock.json into $dir"
  mkdir -p "$dir"
  cp tests/console/package.json tests/console/package-lock.json "$dir/"
  (cd "$dir" && npm ci --silent --no-audit --no-fund --cache "$TOOLS/npm-cache" >&2)
}

case "${1:-}" in
  install) install ;;
  path) echo "$dir/node_modules" ;;
  *)
    echo "usage: scripts/console-tests.sh install|path" >&2
    exit 2
    ;;
esac
