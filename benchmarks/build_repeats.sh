#!/usr/bin/env bash
# Rebuild benchmarks/data/code_apply_repeats.jsonl from mirrors of the source repositories.
# MIRRORS holds one bare git dir per repository at MIRRORS/<owner>+<name>/repo (a
# `git clone --bare` at the HEAD named in benchmarks/data/README.md gives the same tasks).
set -euo pipefail
MIRRORS=${MIRRORS:-/work/.mirror}
OUT=${1:-benchmarks/data/code_apply_repeats.jsonl}
: > "$OUT"
mine() {
    local repo=$1
    shift
    python3 benchmarks/mine_repeats.py "$MIRRORS/${repo/\//+}/repo" --repo "$repo" "$@" >> "$OUT"
}
mine spf13/cobra --limit 2
mine encode/starlette --limit 4 --max-lines 120 --max-commit-files 20
mine pallets/flask --limit 5
