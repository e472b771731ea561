#!/usr/bin/env bash
# Rebuild benchmarks/data/code_apply_mined2.jsonl (the second mined set, from repositories that
# no other set draws from) from mirrors of the source repositories.
# MIRRORS holds one bare git dir per repository at MIRRORS/<owner>+<name>/repo (a
# `git clone --bare` at the HEAD named in benchmarks/data/README.md gives the same tasks).
set -euo pipefail
MIRRORS=${MIRRORS:-/work/.mirror}
OUT=${1:-benchmarks/data/code_apply_mined2.jsonl}
: > "$OUT"
mine() {
    local repo=$1
    shift
    python3 benchmarks/mine_commits.py "$MIRRORS/${repo/\//+}/repo" --repo "$repo" "$@" >> "$OUT"
}
mine python-attrs/attrs --limit 8
mine jd/tenacity --limit 8
mine koajs/koa --limit 8
mine pmndrs/zustand --limit 8
mine go-chi/chi --limit 8
mine urfave/cli --limit 8
mine tokio-rs/bytes --limit 8
mine jhy/jsoup --limit 8
mine sinatra/sinatra --limit 8
mine guzzle/guzzle --limit 8
mine ajalt/clikt --limit 8
mine serilog/serilog --limit 8
mine Alamofire/Alamofire --limit 8
