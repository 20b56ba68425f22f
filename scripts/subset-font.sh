#!/usr/bin/env bash
# Regenerates reports/assets/DejaVuSans-subset.ttf, the font the SVG charts embed as an
# @font-face data URI: DejaVu Sans cut down to the characters charts and reports use (Basic
# Latin, Latin-1, general punctuation, arrows, math signs, Greek mu), kerning kept, hinting
# dropped. Needs fontTools (`pip install fonttools`). The PNGs use the whole font.
set -euo pipefail
cd "$(dirname "$0")/.."
pyftsubset reports/assets/DejaVuSans.ttf \
    --unicodes="U+0020-007E,U+00A0-00FF,U+03BC,U+2010-2027,U+2030,U+2190-2193,U+2212,U+2248,U+2260,U+2264-2265" \
    --layout-features='kern' --no-hinting --desubroutinize \
    --name-IDs='*' --name-legacy --name-languages='*' \
    --output-file=reports/assets/DejaVuSans-subset.ttf
