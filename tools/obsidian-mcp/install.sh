#!/usr/bin/env bash
# Installs obsidian-mcp (PyPI, the versions pinned in requirements.txt) into
# tools/obsidian-mcp/.venv for the obsidian-mcp target, and names its interpreter
# `obsidian-mcp-python` there (the target's version probe runs it; the presets find commands
# in tools/obsidian-mcp/.venv/bin). Idempotent: an existing venv with the pinned version is
# left as it is.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
want="$(sed -n 's/^obsidian-mcp==//p' "$here/requirements.txt")"
probe='import importlib.metadata as m; print(m.version("obsidian-mcp"))'
if [ -x "$venv/bin/obsidian-mcp-python" ] && [ "$("$venv/bin/obsidian-mcp-python" -c "$probe" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
ln -sf python "$venv/bin/obsidian-mcp-python"
