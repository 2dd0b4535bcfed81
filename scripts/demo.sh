#!/usr/bin/env bash
# The main job, end to end on local servers this script starts itself:
# build shoal, start fake-gcs-server and MinIO, create a 256 MiB file, copy
# it to gs:// and s3:// and back, verify the bytes, print the throughput.
#
#   scripts/demo.sh [SIZE_MIB]     (default 256)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=${1:-256}

export SHOAL_CACHE=${SHOAL_CACHE:-$HOME/.cache/shoal}
export SHOAL_RUN_DIR=$(mktemp -d /tmp/shoal-demo.XXXXXX)
# Free ports (scripts/lib.sh), as scripts/test.sh picks them, unless the
# caller chose: fake-gcs-server, MinIO (its console on the next port),
# toxiproxy.
. scripts/lib.sh
p=$(free_block 5)
export SHOAL_GCS_PORT=${SHOAL_GCS_PORT:-$p}
export SHOAL_S3_PORT=${SHOAL_S3_PORT:-$((p + 2))}
export SHOAL_TOXI_PORT=${SHOAL_TOXI_PORT:-$((p + 4))}
WORK=$(mktemp -d /tmp/shoal-demo-data.XXXXXX)
cleanup() { scripts/servers.sh stop || true; rm -rf "$SHOAL_RUN_DIR" "$WORK"; }
trap cleanup EXIT

echo "== building shoal (release)"
# The workspace's features, as `cargo build --release` at the top builds
# them: after one, this builds nothing (`-p shoal-cli` alone would unify
# fewer features and compile 36 crates again, 4 minutes).
cargo build --release --locked --workspace --bin shoal
SHOAL=${CARGO_TARGET_DIR:-target}/release/shoal

echo "== starting fake-gcs-server and MinIO on 127.0.0.1"
scripts/servers.sh start gcs s3
export STORAGE_EMULATOR_HOST=http://127.0.0.1:$SHOAL_GCS_PORT
export AWS_ENDPOINT_URL=http://127.0.0.1:$SHOAL_S3_PORT
export AWS_ACCESS_KEY_ID=minioadmin AWS_SECRET_ACCESS_KEY=minioadmin AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true GCE_METADATA_HOST=127.0.0.1:9

echo "== creating a ${SIZE_MIB} MiB file"
head -c $((SIZE_MIB << 20)) /dev/urandom > "$WORK/big.bin"
want=$(sha256sum < "$WORK/big.bin" | cut -d' ' -f1)

for scheme in gs s3; do
  echo "== $scheme://"
  "$SHOAL" mb "$scheme://demo"
  "$SHOAL" cp "$WORK/big.bin" "$scheme://demo/big.bin"
  "$SHOAL" cp "$scheme://demo/big.bin" "$WORK/back-$scheme.bin"
  got=$(sha256sum < "$WORK/back-$scheme.bin" | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then
    echo "demo: $scheme round trip differs (sha256 $got, want $want)" >&2
    exit 1
  fi
  echo "verified: $scheme round trip is byte-identical (sha256 ${want:0:16}…)"
done
echo "== done"
