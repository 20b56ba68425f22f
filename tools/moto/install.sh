#!/usr/bin/env bash
# Installs moto's server (PyPI `moto[server]`, the versions pinned in requirements.txt) into
# tools/moto/.venv for the moto-s3 target, and names its interpreter `moto-python` there (the
# target's version probe runs it; the presets find commands in tools/moto/.venv/bin).
# Idempotent: an existing venv with the pinned moto is left as it is.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
want="$(sed -n 's/^moto==//p' "$here/requirements.txt")"
if [ -x "$venv/bin/moto-python" ] && [ "$("$venv/bin/moto-python" -c 'import moto; print(moto.__version__)' 2>/dev/null)" = "$want" ]; then
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
ln -sf python "$venv/bin/moto-python"
