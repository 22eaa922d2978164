#!/usr/bin/env bash
# Installs what the build, the tests and the demo need and this machine lacks: the Debian
# packages of tests/apt-packages.txt and the Python packages of tests/requirements.txt (the
# lists .ci/run installs). Without the right to install (not root, no password-less sudo, no
# apt-get) it names what is missing and goes on: what needs a missing package says so then.
set -u
cd "$(dirname "$0")/.."
missing=()
for p in $(grep -v '^#' tests/apt-packages.txt); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  if command -v apt-get >/dev/null && { [ -z "$SUDO" ] || sudo -n true 2>/dev/null; }; then
    echo "installing the missing packages: ${missing[*]}"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null \
      || echo "install_deps: apt-get could not install ${missing[*]}" >&2
  else
    echo "install_deps: missing ${missing[*]}; install them with: sudo apt-get install ${missing[*]}" >&2
  fi
fi
if command -v python3 >/dev/null && ! python3 -c "import tokenizers, jinja2" 2>/dev/null; then
  echo "installing the Python packages of tests/requirements.txt"
  # a Debian system python refuses plain pip installs (PEP 668); pyenv and venvs take them
  python3 -m pip install -q -r tests/requirements.txt 2>/dev/null \
    || python3 -m pip install -q --break-system-packages -r tests/requirements.txt 2>/dev/null \
    || echo "install_deps: pip could not install tests/requirements.txt (the cross-checks that need it will say so)" >&2
fi
exit 0
