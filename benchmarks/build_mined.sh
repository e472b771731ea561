#!/usr/bin/env bash
# Rebuild benchmarks/data/code_apply_mined.jsonl from mirrors of the source repositories
# (MIRRORS, see mining.sh).
set -euo pipefail
OUT=${1:-benchmarks/data/code_apply_mined.jsonl}
source "$(dirname "$0")/mining.sh"
mine rack/rack --limit 10
mine slimphp/Slim --limit 10
mine jbogard/MediatR --limit 8 --first-parent
mine App-vNext/Polly --limit 8
mine bats-core/bats-core --limit 10
mine square/kotlinpoet --limit 10
mine apple/swift-argument-parser --limit 10
mine com-lihaoyi/os-lib --limit 10
mine nvim-lua/plenary.nvim --limit 10
mine google/gson --limit 10
mine dtolnay/anyhow --limit 10
mine redis/hiredis --limit 10
mine gabime/spdlog --limit 10 --ext-lang .h=cpp
mine h5bp/html5-boilerplate --limit 8
mine pgvector/pgvector --limit 3 --only sql
