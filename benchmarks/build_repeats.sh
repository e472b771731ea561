#!/usr/bin/env bash
# Rebuild benchmarks/data/code_apply_repeats.jsonl from mirrors of the source repositories
# (MIRRORS, see mining.sh).
set -euo pipefail
OUT=${1:-benchmarks/data/code_apply_repeats.jsonl}
MINER=mine_repeats.py
source "$(dirname "$0")/mining.sh"
mine spf13/cobra --limit 2
mine encode/starlette --limit 4 --max-lines 120 --max-commit-files 20
mine pallets/flask --limit 5
