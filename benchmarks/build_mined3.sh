#!/usr/bin/env bash
# Rebuild benchmarks/data/code_apply_mined3.jsonl (the third mined set, from repositories that
# no other set draws from) from mirrors of the source repositories (MIRRORS, see mining.sh).
set -euo pipefail
OUT=${1:-benchmarks/data/code_apply_mined3.jsonl}
source "$(dirname "$0")/mining.sh"
mine marshmallow-code/marshmallow --limit 8
mine tiangolo/typer --limit 8
mine sindresorhus/ky --limit 8
mine sirupsen/logrus --limit 8
mine gorilla/mux --limit 8
mine dtolnay/thiserror --limit 8
mine square/javapoet --limit 8
mine jnunemaker/httparty --limit 8
mine vlucas/phpdotenv --limit 8
mine square/moshi --limit 8
mine SwiftyJSON/SwiftyJSON --limit 8
mine folke/lazy.nvim --limit 8
mine DaveGamble/cJSON --limit 8
mine nvm-sh/nvm --limit 8
mine restsharp/RestSharp --limit 8
mine com-lihaoyi/fastparse --limit 8
