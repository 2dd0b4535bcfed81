#!/usr/bin/env bash
# One 10 GiB object down and up through shoal-benchserver (S3), to show that
# peak RSS does not grow with the object, and how close the client comes to
# the machine's own copy rates. Writes bench/results/BIG-RSS.md.
#
#   bench/big_rss.sh [SIZE_BYTES]     (default 10 GiB; needs that much disk)
#
# The download goes to a file on disk (not tmpfs, which would charge the
# bytes to memory): shoal preallocates a sparse temporary file and writes
# each slice at its offset. The upload reads a sparse file of that size
# (zeros, read from the page cache) in parallel multipart parts. The
# benchserver generates what it serves and discards what it receives.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${1:-10737418240}
CACHE=${SHOAL_CACHE:-$HOME/.cache/shoal}
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
SHOAL=${SHOAL_BIN:-$TARGET/release/shoal}
BSERVER=${BENCHSERVER_BIN:-$TARGET/release/shoal-benchserver}
PORT=${SHOAL_BIG_PORT:-31470}
OUT=bench/results/BIG-RSS.md
[ -x "$SHOAL" ] && [ -x "$BSERVER" ] || cargo build --release --locked -p shoal-cli -p shoal-benchserver

WORK=$(mktemp -d "${SHOAL_BIG_DIR:-$PWD}/.big-rss.XXXXXX")
"$BSERVER" serve --port "$PORT" >"$WORK/server.log" 2>&1 &
SERVER=$!
cleanup() { kill "$SERVER" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done

export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench \
  AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true

# "wall_s max_rss_kib cpu_s" of a command, via GNU time.
measure() {
  /usr/bin/time -f "%e %M %U %S" -o "$WORK/time" "$@" >"$WORK/out" 2>&1 || {
    cat "$WORK/out" >&2
    return 1
  }
  awk '{printf "%s %s %.2f\n", $1, $2, $3 + $4}' "$WORK/time"
}

gib=$(awk -v s="$SIZE" 'BEGIN{printf "%.1f", s / 1073741824}')
echo "big_rss: downloading $gib GiB to $WORK" >&2
read -r dw dr dc < <(measure "$SHOAL" cp -q "s3://bench/size-$SIZE" "$WORK/down")
got=$(stat -c %s "$WORK/down")
[ "$got" = "$SIZE" ] || { echo "big_rss: downloaded $got bytes, expected $SIZE" >&2; exit 1; }
disk=$(du -k "$WORK/down" | cut -f1)
rm -f "$WORK/down"

echo "big_rss: uploading $gib GiB from a sparse file" >&2
truncate -s "$SIZE" "$WORK/up"
cat "$WORK/up" >/dev/null # page cache warm, as a file just written would be
read -r uw ur uc < <(measure "$SHOAL" cp -q "$WORK/up" "s3://bench/up-$SIZE")
rm -f "$WORK/up"

# The machine's own rates for comparison: copying zeros through the kernel
# (memory bandwidth as a process sees it) and writing to a file on the
# same disk (what any download into it pays).
echo "big_rss: measuring the machine's copy rates" >&2
zcopy=$(python3 -c '
import time
n = 1 << 30
src, dst = bytearray(b"x" * n), bytearray(n)
dst[:] = src
t = time.perf_counter()
for _ in range(4):
    dst[:] = src
print(f"{4 * n / (time.perf_counter() - t) / 1e9:.1f} GB/s")')
dwrite=$(dd if=/dev/zero of="$WORK/dd" bs=1M count=4096 conv=fdatasync 2>&1 | awk '/copied/{print $(NF-1), $NF}')
rm -f "$WORK/dd"

rate() { awk -v s="$SIZE" -v t="$1" 'BEGIN{printf "%.0f", s / t / 1048576}'; }
mib() { awk -v k="$1" 'BEGIN{printf "%.0f", k / 1024}'; }
cat >"$OUT" <<EOF
# One big object: peak RSS and the machine's limits

\`bench/big_rss.sh $SIZE\` on $(date -u '+%Y-%m-%d %H:%M UTC'): $(nproc) vCPUs, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo),
shoal-benchserver (S3) on 127.0.0.1 generating and discarding the bytes, destination on disk.

| operation | size | wall s | MiB/s | client CPU s | peak RSS MiB |
|---|--:|--:|--:|--:|--:|
| download (sparse temp file, slices written in place) | $gib GiB | $dw | $(rate "$dw") | $dc | $(mib "$dr") |
| upload (S3 multipart, parts in parallel) | $gib GiB | $uw | $(rate "$uw") | $uc | $(mib "$ur") |

Disk blocks of the finished download: $(mib "$disk") MiB (the file is whole, not sparse, once verified).

The machine: one core's memcpy of 1 GiB between resident buffers $zcopy (a download
copies each byte at least twice: socket to user buffer, user buffer to page cache);
\`dd of=FILE bs=1M conv=fdatasync\` on the same disk $dwrite.
EOF
cat "$OUT"
