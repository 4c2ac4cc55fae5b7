#!/usr/bin/env bash
# Install whatever is missing for tribunal on a fresh machine, and nothing that is already there:
#   system: Python >= 3.11 with venv, a JDK 17, Maven (from Debian packages when absent), and
#           for the tests (TRIBUNAL_TEST_DEPS=1, as `make test` sets it) Chromium, kcat and iproute2;
#   .venv/: tribunal and its test extras (re-installed only when pyproject.toml changes);
#   infra/lib/: the Kafka and ZooKeeper jars from Maven Central (resolved once per pom.xml).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*" >&2; }

apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  command -v apt-get >/dev/null || { say "missing: $*; install them with your package manager"; exit 1; }
  say "installing $* from Debian packages"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  apt_install python3 python3-venv
fi
command -v java >/dev/null || apt_install openjdk-17-jre-headless
command -v mvn >/dev/null || apt_install maven
if [ "${TRIBUNAL_TEST_DEPS:-0}" = 1 ]; then
  # the audit report's test renders the page in a real headless browser; kcat (librdkafka) is
  # the third-party producer the routing tests publish with (CRC32 keys, keyless records); iproute2's
  # ip makes the network namespaces and veth links of the partition tests (tests/netns.py); the console's
  # tests drive that Chromium through its WebDriver (chromium-driver) and check each page with axe-core (npm)
  missing=()
  command -v chromium >/dev/null || missing+=(chromium)
  command -v chromedriver >/dev/null || missing+=(chromium-driver)
  command -v kcat >/dev/null || missing+=(kcat)
  command -v ip >/dev/null || missing+=(iproute2)
  command -v npm >/dev/null || missing+=(npm)
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  if [ ! -f infra/npm/node_modules/axe-core/axe.min.js ]; then
    say "installing axe-core from the npm registry (the console's accessibility checks)"
    npm ci --silent --prefix infra/npm >&2
  fi
fi

stamp=.venv/.tribunal-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "creating .venv and installing tribunal"
  "$PYTHON" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[test]'
  echo "$want" > "$stamp"
fi

# The pure core compiled with mypyc (streams/compiled.py) where a C compiler and Python's headers are
# installed, again only when its sources changed; else it runs as pure Python, with the same bytes.
if [ "${TRIBUNAL_PURE:-0}" = 1 ]; then
  say "TRIBUNAL_PURE=1: the core is not compiled"
elif ! command -v cc >/dev/null || [ ! -f "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then
  say "no C compiler or no Python headers: the core runs as pure Python (install gcc and python3-dev to compile it)"
elif [ "$(cat streams/core/.compiled 2>/dev/null)" != "$(TRIBUNAL_PURE=1 .venv/bin/python -c 'from streams.compiled import digest; print(digest())')" ]; then
  say "compiling the core with mypyc (about two minutes on two cores)"
  .venv/bin/python infra/compile_core.py >/dev/null || say "mypyc failed: the core runs as pure Python"
fi

.venv/bin/tribunal infra install >&2
