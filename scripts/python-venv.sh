# Sourced by the scripts that install one pinned Python tool from PyPI into
# a venv of its own (schemathesis.sh, kafka-connect-py.sh, confluent-py.sh).
#
#   pinned_venv VENV PIN EXECUTABLE LOG_NAME
#
# installs PIN into VENV unless VENV/bin/EXECUTABLE exists and VENV/.pins
# holds PIN; Debian's python3 makes venvs only with python3-venv, installed
# with apt as scripts/setup.sh does. A failed install says so and exits 1.

pinned_venv() {
  local venv="$1" pin="$2" executable="$3" name="$4"
  if [[ -x "$venv/bin/$executable" && "$(cat "$venv/.pins" 2>/dev/null)" == "$pin" ]]; then
    return
  fi
  if ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed"; then
    echo "$name: installing python3-venv" >&2
    local sudo=""
    [[ "$(id -u)" == 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  echo "$name: installing $pin into $venv" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv --clear "$venv"
  if ! "$venv/bin/pip" install -q --disable-pip-version-check "$pin" >&2; then
    echo "$name: could not install $pin from PyPI" >&2
    exit 1
  fi
  echo "$pin" >"$venv/.pins"
}
