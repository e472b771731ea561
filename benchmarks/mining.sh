# Sourced by the build_*.sh scripts after they set OUT (the set's file, emptied here) and,
# optionally, MINER (default mine_commits.py). `mine OWNER/NAME [options]` appends the tasks
# the miner draws from the bare git dir at $MIRRORS/<owner>+<name>/repo (a `git clone --bare`
# at the HEAD named in benchmarks/data/README.md gives the same tasks) to $OUT.
set -euo pipefail
MIRRORS=${MIRRORS:-/work/.mirror}
: > "$OUT"
mine() {
    local repo=$1
    shift
    python3 "benchmarks/${MINER:-mine_commits.py}" "$MIRRORS/${repo/\//+}/repo" --repo "$repo" "$@" >> "$OUT"
}
