#!/usr/bin/env bash
# Set up (or refresh) the project's virtualenv in .venv: idempotent, offline-safe, quiet unless something changes.
#   scripts/setup.sh            runtime + web extras
#   scripts/setup.sh dev        + test dependencies (PyTorch zoo, Hugging Face libraries)
# torch is installed FIRST and pinned: an unpinned torch pulls a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION="2.13.0"
EXTRAS="web${1:+,$1}"
VENV=.venv
PY="${PYTHON:-}"

if [ -z "$PY" ]; then
  for cand in python3.11 python3.12 python3.13 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      PY="$cand"; break
    fi
  done
fi
[ -n "$PY" ] || { echo "setup: Python >= 3.11 is required (set PYTHON=/path/to/python3.11)" >&2; exit 1; }

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV with $($PY --version)"
  "$PY" -m venv "$VENV"
fi
# pip warns about every unreadable local index location on some machines: keep only real messages.
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check "$@" 2> >(grep -v "^WARNING: Location '" >&2); }

if [ "${1:-}" = "dev" ] && [ ! -x /usr/bin/chromium ]; then
  # The web chat's browser tests drive Debian's chromium (Playwright's own browser download is not used).
  echo "setup: installing chromium for the browser tests (apt-get)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

# Re-install only when the dependency spec or the requested extras changed.
stamp="$VENV/.trainfix-setup"
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16) $EXTRAS"
if [ -f "$stamp" ] && grep -qxF "$want" "$stamp"; then
  exit 0
fi
# A dev setup satisfies a plain one.
if [ -z "${1:-}" ] && [ -f "$stamp" ] && grep -qxF "$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16) web,dev" "$stamp"; then
  exit 0
fi

if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  echo "setup: installing torch==$TORCH_VERSION (CPU build where available)"
  pip install -q "torch==$TORCH_VERSION"
fi
echo "setup: installing trainfix[$EXTRAS] and its dependencies"
pip install -q -e ".[$EXTRAS]"
echo "$want" > "$stamp"
echo "setup: done ($VENV)"
