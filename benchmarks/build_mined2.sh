#!/usr/bin/env bash
# Rebuild benchmarks/data/code_apply_mined2.jsonl (the second mined set, from repositories that
# no other set draws from) from mirrors of the source repositories (MIRRORS, see mining.sh).
set -euo pipefail
OUT=${1:-benchmarks/data/code_apply_mined2.jsonl}
source "$(dirname "$0")/mining.sh"
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
