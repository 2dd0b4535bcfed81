#!/usr/bin/env bash
# Finds flaky tests: runs the tests N times and lists every test that failed
# in any run, with how often. A test that fails once in twenty runs blocks
# a good change one time in twenty, so this is run before a change to the
# suite lands.
#
#   scripts/flakes.sh [-n N] [--one-core] [--servers] [--python] [-- ARGS]
#
#   -n N        runs (default 20)
#   --one-core  every run under `taskset -c 0`: one core makes scheduling
#               orders that two cores rarely do
#   --servers   also the tests that need servers: starts them once (own
#               ports, like scripts/test.sh) and stops them at the end;
#               without it those tests skip themselves
#   --python    also the Python tests each run (needs the venv and the
#               extension scripts/test.sh builds)
#   -- ARGS     passed to `cargo test` (e.g. `-p shoal-list` or a filter)
#
# Exit 0 when every run passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=20 one_core=0 servers=0 python=0
while [ $# -gt 0 ]; do
  case "$1" in
    -n) runs=$2; shift 2 ;;
    --one-core) one_core=1; shift ;;
    --servers) servers=1; shift ;;
    --python) python=1; shift ;;
    --) shift; break ;;
    *) echo "flakes.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
case "$runs" in ''|*[!0-9]*|0) echo "flakes.sh: -n takes a whole number above 0, not '$runs'" >&2; exit 2 ;; esac

export SHOAL_CACHE=${SHOAL_CACHE:-$HOME/.cache/shoal}
export CARGO_TERM_COLOR=never
work=$(mktemp -d /tmp/shoal-flakes.XXXXXX)
export SHOAL_RUN_DIR=$work/run
mkdir -p "$SHOAL_RUN_DIR"

wrap=()
[ "$one_core" = 1 ] && wrap=(taskset -c 0)

cleanup() { [ "$servers" = 1 ] && scripts/servers.sh stop >/dev/null 2>&1; rm -rf "$work"; }
trap cleanup EXIT

if [ "$servers" = 1 ]; then
  . scripts/lib.sh
  p=$(free_block 6)
  p1=$p p2=$((p + 2)) p3=$((p + 4))
  export SHOAL_GCS_PORT=$p1 SHOAL_S3_PORT=$p2 SHOAL_TOXI_PORT=$p3
  scripts/servers.sh start gcs s3 toxiproxy
  eval "$(scripts/servers.sh env)"
  export SHOAL_REQUIRE_SERVERS=1
fi
export AWS_EC2_METADATA_DISABLED=true GCE_METADATA_HOST=127.0.0.1:9 GCE_METADATA_IP=127.0.0.1:9
export NO_PROXY='*'

# Build once, so the runs measure tests and not the compiler.
cargo test --workspace --locked --no-run "$@" >/dev/null 2>&1 \
  || { echo "flakes.sh: the tests do not build; run cargo test to see why" >&2; exit 1; }

tally=$work/tally
: > "$tally"
venv=$SHOAL_CACHE/py-venv
for i in $(seq "$runs"); do
  log=$work/run-$i.log
  set +e
  "${wrap[@]}" cargo test --workspace --locked --no-fail-fast "$@" > "$log" 2>&1
  rc=$?
  if [ "$python" = 1 ]; then
    "${wrap[@]}" "$venv/bin/python" -m pytest -q -rfE -p no:cacheprovider python/tests > "$log.py" 2>&1
    prc=$?
    [ "$prc" = 0 ] || grep -E '^(FAILED|ERROR) ' "$log.py" | sed 's/ - .*//' >> "$tally"
    [ "$prc" = 0 ] || rc=1
  fi
  set -e
  passed=$(grep -Eo '[0-9]+ passed' "$log" | awk '{s+=$1} END {print s+0}')
  if [ "$rc" = 0 ]; then
    echo "run $i/$runs: ok ($passed cargo tests passed)"
  else
    kept=/tmp/shoal-flakes-run-$i.log
    cp "$log" "$kept"
    n=$(grep -cE '^test .* \.\.\. FAILED$' "$log" || true)
    grep -E '^test .* \.\.\. FAILED$' "$log" | sed 's/^test //; s/ \.\.\. FAILED$//' >> "$tally" || true
    # A test binary that died (abort, signal) names no test: name the binary.
    [ "$n" != 0 ] || grep -E 'process didn.t exit successfully|^error: ' "$log" | head -n 3 >> "$tally" || true
    echo "run $i/$runs: FAILED ($n cargo tests named); log kept as $kept"
  fi
done

if [ -s "$tally" ]; then
  echo
  echo "flakes.sh: tests that failed at least once in $runs runs:"
  sort "$tally" | uniq -c | sort -rn | sed 's/^/  /'
  exit 1
fi
echo "flakes.sh: $runs of $runs runs passed"
