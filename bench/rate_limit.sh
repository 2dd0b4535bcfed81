#!/usr/bin/env bash
# How close --rate-limit keeps a command to its limit: an upload, a
# download and a cp -r of many files against MinIO, each sized to take
# 2-4 s at its limit, timed from outside (the whole command, start-up
# included), with the measured rate and its ratio to the limit printed.
# A measurement, not a test: the promise is "within 10% over any transfer
# longer than two seconds" (shoal_transfer::rate); its unit tests check the
# token bucket on a paused clock.
#
#   bench/rate_limit.sh [SHOAL_BINARY]   (default: target/release/shoal,
#                                          else $CARGO_TARGET_DIR/debug/shoal)
#
# Needs SHOAL_TEST_S3 (+ SHOAL_TEST_S3_KEY / _SECRET), as scripts/test.sh
# or `eval "$(scripts/servers.sh env)"` sets them.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-}
if [ -z "$bin" ]; then
  for b in target/release/shoal "${CARGO_TARGET_DIR:-target}/release/shoal" "${CARGO_TARGET_DIR:-target}/debug/shoal"; do
    [ -x "$b" ] && bin=$b && break
  done
fi
[ -x "$bin" ] || { echo "rate_limit: no shoal binary (give its path)" >&2; exit 1; }
[ -n "${SHOAL_TEST_S3:-}" ] || { echo "rate_limit: SHOAL_TEST_S3 is not set" >&2; exit 1; }
export AWS_ENDPOINT_URL=$SHOAL_TEST_S3 AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=${SHOAL_TEST_S3_KEY:-minioadmin} AWS_SECRET_ACCESS_KEY=${SHOAL_TEST_S3_SECRET:-minioadmin}

work=$(mktemp -d /tmp/shoal-rate.XXXXXX)
bucket=rate-$(date +%s)-$$
trap '"$bin" -q rm -r "s3://$bucket/" >/dev/null 2>&1; "$bin" -q rb "s3://$bucket" >/dev/null 2>&1; rm -rf "$work"' EXIT
"$bin" -q mb "s3://$bucket"
head -c $((60 << 20)) /dev/urandom > "$work/big"
mkdir "$work/many"
for i in $(seq -w 1 30); do head -c $((2 << 20)) /dev/urandom > "$work/many/f$i"; done
"$bin" -q cp "$work/big" "s3://$bucket/seed/big"

# measure NAME LIMIT_MIB BYTES COMMAND...
measure() {
  local name=$1 limit=$2 bytes=$3; shift 3
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null
  t1=$(date +%s.%N)
  awk -v n="$name" -v l="$limit" -v b="$bytes" -v t0="$t0" -v t1="$t1" 'BEGIN {
    s = t1 - t0; r = b / s / 1048576;
    printf "%-28s limit %5.1f MiB/s  %6.1f MiB in %5.2f s  = %6.2f MiB/s  (%+.1f%%)\n", n, l, b / 1048576, s, r, (r / l - 1) * 100
  }'
}

measure "upload 60 MiB"            20 $((60 << 20)) "$bin" -q cp --rate-limit 20MiB "$work/big" "s3://$bucket/up/big"
measure "download 60 MiB"          10 $((60 << 20)) "$bin" -q cp --rate-limit 10MiB "s3://$bucket/seed/big" "$work/down"
measure "cp -r 30 x 2 MiB up"      30 $((60 << 20)) "$bin" -q cp --rate-limit 30MiB -r "$work/many" "s3://$bucket/tree/"
measure "cp -r 30 x 2 MiB down"    30 $((60 << 20)) "$bin" -q cp --rate-limit 30MiB -r "s3://$bucket/tree/many" "$work/back/"
