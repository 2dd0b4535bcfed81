#!/usr/bin/env bash
# A durable download to a real disk, beside the disk's own floor. shoal
# fdatasyncs every download before renaming it into place; the floor is
# `dd conv=fdatasync` writing the same number of bytes from memory to the
# same disk. s5cmd (which does not sync) is shown beside, not as a target.
# Rounds are interleaved (dd, shoal, [shoal-before], s5cmd, dd, ...) and
# medians reported, since the server (shoal-benchserver, generating the
# bytes) shares the machine's cores. Writes bench/results/DURABLE.md.
#
#   bench/durable.sh [SIZE_BYTES] [ROUNDS]     (default 512 MiB, 5 rounds)
#
# SHOAL_BEFORE=/path/to/shoal adds a row for another build (an A/B).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${1:-536870912}
ROUNDS=${2:-5}
CACHE=${SHOAL_CACHE:-$HOME/.cache/shoal}
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
SHOAL=${SHOAL_BIN:-$TARGET/release/shoal}
BSERVER=${BENCHSERVER_BIN:-$TARGET/release/shoal-benchserver}
S5CMD=${S5CMD_BIN:-$CACHE/bin/s5cmd}
PORT=${SHOAL_DURABLE_PORT:-31480}
OUT=bench/results/DURABLE.md
[ -x "$SHOAL" ] && [ -x "$BSERVER" ] || cargo build --release --locked -p shoal-cli -p shoal-benchserver

WORK=$(mktemp -d "${SHOAL_DURABLE_DIR:-$PWD}/.durable.XXXXXX")
"$BSERVER" serve --port "$PORT" >"$WORK/server.log" 2>&1 &
SERVER=$!
cleanup() { kill "$SERVER" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done

export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench \
  AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true

# Appends "wall_s cpu_s" of a command to the file $1.
measure() {
  local into=$1
  shift
  sync # nothing of an earlier round left to write back
  /usr/bin/time -f "%e %U %S" -o "$WORK/time" "$@" >"$WORK/out" 2>&1 || {
    cat "$WORK/out" >&2
    return 1
  }
  awk '{printf "%s %.2f\n", $1, $2 + $3}' "$WORK/time" >>"$into"
  rm -f "$WORK/down"
}

# The network's own floor: the same download into tmpfs, no disk at all.
SHM=$(mktemp -d /dev/shm/durable.XXXXXX)
trap 'cleanup; rm -rf "$SHM"' EXIT
rows=(dd tmpfs shoal)
[ -n "${SHOAL_BEFORE:-}" ] && rows+=(shoal-before)
[ -x "$S5CMD" ] && rows+=(s5cmd)
mib=$((SIZE / 1048576))
for r in $(seq "$ROUNDS"); do
  echo "durable: round $r of $ROUNDS" >&2
  for row in "${rows[@]}"; do
    case $row in
      dd) measure "$WORK/dd" dd if=/dev/zero of="$WORK/down" bs=1M count="$mib" conv=fdatasync ;;
      tmpfs) measure "$WORK/tmpfs" "$SHOAL" cp -q "s3://bench/size-$SIZE" "$SHM/down"; rm -f "$SHM/down" ;;
      shoal) measure "$WORK/shoal" "$SHOAL" cp -q "s3://bench/size-$SIZE" "$WORK/down" ;;
      shoal-before) measure "$WORK/shoal-before" "$SHOAL_BEFORE" cp -q "s3://bench/size-$SIZE" "$WORK/down" ;;
      s5cmd) measure "$WORK/s5cmd" "$S5CMD" --endpoint-url "$AWS_ENDPOINT_URL" cp "s3://bench/size-$SIZE" "$WORK/down" ;;
    esac
  done
done

median() { sort -n | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
floor=$(cut -d' ' -f1 "$WORK/dd" | median)
{
  echo "# A durable download to disk, beside the disk's floor"
  echo
  echo "\`bench/durable.sh $SIZE $ROUNDS\` on $(date -u '+%Y-%m-%d %H:%M UTC'): $(nproc) vCPUs, ext4 on one virtual disk;"
  echo "shoal-benchserver (S3) on 127.0.0.1 generating the bytes. Medians of $ROUNDS interleaved rounds;"
  echo "\`sync\` before every run so no round inherits another's writeback. A durable download cannot"
  echo "beat the slower of the disk (dd) and the network (tmpfs row)."
  echo
  echo "| row | durable | wall s (median) | runs | client CPU s | x dd |"
  echo "|---|---|--:|---|--:|--:|"
  for row in "${rows[@]}"; do
    w=$(cut -d' ' -f1 "$WORK/$row" | median)
    c=$(cut -d' ' -f2 "$WORK/$row" | median)
    runs=$(cut -d' ' -f1 "$WORK/$row" | tr '\n' ' ' | sed 's/ $//')
    case $row in
      dd) what="\`dd bs=1M conv=fdatasync\` from /dev/zero (the floor)"; durable=yes ;;
      tmpfs) what="shoal cp into tmpfs (the network's floor: no disk)"; durable=n/a ;;
      shoal) what="shoal cp (sliced, fdatasync before rename)"; durable=yes ;;
      shoal-before) what="shoal cp, build \`${SHOAL_BEFORE}\`"; durable=yes ;;
      s5cmd) what="s5cmd cp (no sync: not durable when it exits)"; durable=no ;;
    esac
    x=$(awk -v w="$w" -v f="$floor" 'BEGIN{printf "%.2f", w / f}')
    echo "| $what | $durable | $w | $runs | $c | $x |"
  done
} >"$OUT"
cat "$OUT"
