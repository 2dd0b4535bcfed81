#!/usr/bin/env bash
# Install, start and stop the local object-storage servers shoal is tested
# and benchmarked against. Everything binds 127.0.0.1.
#
#   scripts/servers.sh install          build/install every server (cached)
#   scripts/servers.sh start [NAME...]  start servers (default: gcs s3 toxiproxy;
#                                       also gcsemu, testbench)
#   scripts/servers.sh stop             stop the servers this script started
#   scripts/servers.sh env              print the env vars tests read
#
# Binaries and Go caches live in $SHOAL_CACHE (default ~/.cache/shoal) so a
# second run on the same machine builds nothing. Versions are pinned: the Go
# proxy here refuses `@latest` for some modules (see shared TEST-SERVERS.md).
set -euo pipefail

CACHE=${SHOAL_CACHE:-$HOME/.cache/shoal}
BIN=$CACHE/bin
RUN=${SHOAL_RUN_DIR:-$CACHE/run}
mkdir -p "$BIN" "$RUN"

export GOTOOLCHAIN=local
export GOPATH=$CACHE/go GOCACHE=$CACHE/go-build GOMODCACHE=$CACHE/go/pkg/mod
export GOFLAGS=-trimpath

FAKE_GCS_VERSION=v1.56.1
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
TOXIPROXY_VERSION=v2.5.0
GCP_EMU_VERSION=2026.7.19
MOTO_VERSION=5.2.5

GCS_PORT=${SHOAL_GCS_PORT:-4443}
S3_PORT=${SHOAL_S3_PORT:-9000}
TOXI_PORT=${SHOAL_TOXI_PORT:-8474}
GCSEMU_PORT=${SHOAL_GCSEMU_PORT:-9023}
MOTO_PORT=${SHOAL_MOTO_PORT:-5000}
TESTBENCH_PORT=${SHOAL_TESTBENCH_PORT:-9024}
S3TLS_PORT=${SHOAL_S3TLS_PORT:-9443}

# Files shared beside the project (Google's storage-testbench, the GCS
# conformance files): ../shared from the checkout, or SHOAL_SHARED. A clone
# without them cannot have the testbench; tests that need it skip.
SHARED=${SHOAL_SHARED:-$(cd "$(dirname "$0")/.." && pwd)/../shared}
TESTBENCH_SRC=$SHARED/tools/storage-testbench

log() { echo "servers: $*" >&2; }

install_go_bin() { # name module@version [package-path]
  local name=$1 modver=$2 pkg=${3:-}
  if [ -x "$BIN/$name" ] && [ -f "$BIN/$name.version" ] && [ "$(cat "$BIN/$name.version")" = "$modver" ]; then
    return 0
  fi
  log "building $name ($modver), cached in $CACHE"
  local tmp; tmp=$(mktemp -d)
  ( cd "$tmp" && GOBIN="$tmp" go install "$modver" ) || { rm -rf "$tmp"; return 1; }
  local built; built=$(ls "$tmp" | head -n1)
  [ -n "$pkg" ] && built=$pkg
  mv "$tmp/$built" "$BIN/$name"
  echo "$modver" > "$BIN/$name.version"
  rm -rf "$tmp"
}

install_gcs() { install_go_bin fake-gcs-server "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION"; }
install_s3()  { install_go_bin minio "github.com/minio/minio@$MINIO_VERSION"; }
install_toxiproxy() {
  install_go_bin toxiproxy-server "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION" server
}
install_gcsemu() {
  if [ ! -x "$CACHE/venv-gcsemu/bin/gcp-storage-emulator" ]; then
    log "installing gcp-storage-emulator $GCP_EMU_VERSION"
    python3 -m venv "$CACHE/venv-gcsemu"
    "$CACHE/venv-gcsemu/bin/pip" install -q "gcp-storage-emulator==$GCP_EMU_VERSION"
  fi
}

# moto's S3 server: the second S3 implementation the conformance suite and
# the CLI's S3 tests run against (docs/s3-servers.md). crc32c beside it, or
# it computes CRC32 and calls it CRC32C.
install_moto() {
  local v=$CACHE/venv-moto
  if [ ! -x "$v/bin/moto_server" ] || [ "$(cat "$v/.version" 2>/dev/null)" != "$MOTO_VERSION" ]; then
    log "installing moto[server] $MOTO_VERSION"
    python3 -m venv "$v"
    "$v/bin/pip" install -q "moto[server]==$MOTO_VERSION" crc32c
    echo "$MOTO_VERSION" > "$v/.version"
  fi
}

# Google's storage-testbench (the server Google's client libraries run
# their retry-conformance tests against), in a venv cached under $CACHE and
# rebuilt when the shared copy changes (its setup.py names the version).
# The source folder is read-only: it is copied and installed from the copy.
install_testbench() {
  [ -d "$TESTBENCH_SRC" ] || { log "no $TESTBENCH_SRC: the testbench cannot be installed"; return 1; }
  local venv=$CACHE/venv-testbench stamp
  stamp=$(cat "$TESTBENCH_SRC/setup.py" "$TESTBENCH_SRC/requirements.txt" | sha256sum | cut -c1-16)
  if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  log "installing storage-testbench from $TESTBENCH_SRC into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  local tmp; tmp=$(mktemp -d)
  cp -r "$TESTBENCH_SRC" "$tmp/src" && chmod -R u+w "$tmp/src"
  "$venv/bin/pip" install -q "$tmp/src" || { rm -rf "$tmp" "$venv"; return 1; }
  rm -rf "$tmp"
  echo "$stamp" > "$venv/.stamp"
}

wait_http() { # url seconds
  local url=$1 n=$(( $2 * 10 ))
  for _ in $(seq "$n"); do
    curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
    sleep 0.1
  done
  log "timed out waiting for $url"; return 1
}

# Healthy, and answered by the process this script started: a server that
# could not bind its port (held by someone else's) exits, while the health
# URL may still answer from whatever holds the port.
wait_ours() { # name url seconds
  wait_http "$2" "$3" || return 1
  local pid; pid=$(cat "$RUN/$1.pid")
  sleep 0.2
  kill -0 "$pid" 2>/dev/null && return 0
  log "$1 exited (port taken?): $(tail -n 3 "$RUN/$1.log" 2>/dev/null)"; return 1
}

start_one() { # name cmd...
  local name=$1; shift
  local pidf=$RUN/$name.pid
  if [ -f "$pidf" ] && kill -0 "$(cat "$pidf")" 2>/dev/null; then return 0; fi
  "$@" >"$RUN/$name.log" 2>&1 &
  echo $! > "$pidf"
}

start_gcs() {
  install_gcs
  start_one fake-gcs-server "$BIN/fake-gcs-server" -scheme http -host 127.0.0.1 -port "$GCS_PORT" \
    -backend memory -external-url "http://127.0.0.1:$GCS_PORT" -public-host "127.0.0.1:$GCS_PORT" -log-level warn
  wait_ours fake-gcs-server "http://127.0.0.1:$GCS_PORT/_internal/healthcheck" 30
}
# MinIO refuses every write (507 XMinioStorageFull) once its drive is 99%
# full, and a CI run that met a nearly full shared host disk lost every S3
# test after that point. So its data lives on a tmpfs of its own where this
# user may mount one (root): its fill is then the tests' alone, and RAM only
# holds what was written (the whole suite writes well under the size).
# Elsewhere, a plain folder.
MINIO_TMPFS_SIZE=${SHOAL_MINIO_TMPFS_SIZE:-8g}
mount_minio_data() {
  local dir=$1
  mkdir -p "$dir"
  [ "$MINIO_TMPFS_SIZE" = 0 ] && return 0
  mountpoint -q "$dir" && return 0
  if mount -t tmpfs -o "size=$MINIO_TMPFS_SIZE" tmpfs "$dir" 2>/dev/null; then
    echo "$dir" > "$RUN/minio-data.mount"
  else
    log "minio: no tmpfs for its data (needs mount permission); using $dir on the host disk"
  fi
}

start_s3() {
  install_s3
  if [ -f "$RUN/minio.pid" ] && kill -0 "$(cat "$RUN/minio.pid")" 2>/dev/null; then return 0; fi
  if [ -f "$RUN/minio-data.mount" ]; then umount -l "$RUN/minio-data" 2>/dev/null || true; rm -f "$RUN/minio-data.mount"; fi
  rm -rf "$RUN/minio-data"; mount_minio_data "$RUN/minio-data"
  # Deleted objects go to MinIO's trash, purged every 5 minutes by default:
  # a benchmark that uploads and deletes 1 GiB objects filled the tmpfs
  # (507 XMinioStorageFull, then the OOM killer). Purge every 5 s instead.
  MINIO_ROOT_USER=minioadmin MINIO_ROOT_PASSWORD=minioadmin MINIO_BROWSER=off \
    MINIO_API_DELETE_CLEANUP_INTERVAL=5s \
    start_one minio "$BIN/minio" server --quiet --address "127.0.0.1:$S3_PORT" \
    --console-address "127.0.0.1:$((S3_PORT + 1))" "$RUN/minio-data"
  wait_ours minio "http://127.0.0.1:$S3_PORT/minio/health/live" 60
}
# A second MinIO for encryption tests (docs/encryption.md): over TLS
# (MinIO takes customer keys, SSE-C, only over TLS) with a static KMS key
# (SSE-S3 and SSE-KMS need one). Its certificate comes from a CA made here
# with openssl; clients trust it with SHOAL_TEST_CA_BUNDLE. The KMS key is
# a test constant, not a secret.
start_s3tls() {
  install_s3
  if [ -f "$RUN/minio-tls.pid" ] && kill -0 "$(cat "$RUN/minio-tls.pid")" 2>/dev/null; then return 0; fi
  local certs=$RUN/minio-tls-certs
  rm -rf "$certs" "$RUN/minio-tls-data"; mkdir -p "$certs/CAs" "$RUN/minio-tls-data"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=shoal test CA" \
    -keyout "$certs/ca.key" -out "$certs/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$certs/private.key" -out "$certs/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' > "$certs/ext.cnf"
  openssl x509 -req -in "$certs/server.csr" -CA "$certs/ca.crt" -CAkey "$certs/ca.key" \
    -CAcreateserial -days 2 -extfile "$certs/ext.cnf" -out "$certs/public.crt" 2>/dev/null
  MINIO_ROOT_USER=minioadmin MINIO_ROOT_PASSWORD=minioadmin MINIO_BROWSER=off \
    MINIO_KMS_SECRET_KEY=shoal-test-key:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY= \
    start_one minio-tls "$BIN/minio" server --quiet --certs-dir "$certs" \
    --address "127.0.0.1:$S3TLS_PORT" --console-address "127.0.0.1:$((S3TLS_PORT + 1))" \
    "$RUN/minio-tls-data"
  for _ in $(seq 600); do
    curl -sf --cacert "$certs/ca.crt" "https://127.0.0.1:$S3TLS_PORT/minio/health/live" >/dev/null && return 0
    sleep 0.1
  done
  log "minio-tls did not answer on port $S3TLS_PORT"; return 1
}
start_toxiproxy() {
  install_toxiproxy
  start_one toxiproxy "$BIN/toxiproxy-server" -host 127.0.0.1 -port "$TOXI_PORT"
  wait_ours toxiproxy "http://127.0.0.1:$TOXI_PORT/version" 30
}
start_gcsemu() {
  install_gcsemu
  start_one gcp-storage-emulator "$CACHE/venv-gcsemu/bin/gcp-storage-emulator" start \
    --host 127.0.0.1 --port "$GCSEMU_PORT" --in-memory
  wait_http "http://127.0.0.1:$GCSEMU_PORT/" 30 || true
}

start_moto() {
  install_moto
  start_one moto "$CACHE/venv-moto/bin/moto_server" -H 127.0.0.1 -p "$MOTO_PORT"
  wait_ours moto "http://127.0.0.1:$MOTO_PORT/moto-api/" 60
}

start_testbench() {
  install_testbench
  # Run from the shared source (testbench_run.py is not installed);
  # gunicorn with 10 threads, as its README starts it.
  # It runs `gunicorn` from PATH: the venv's, as a child that outlives a
  # kill of testbench_run.py: started in a process group of its own
  # (setsid), which stop_all ends whole.
  (cd "$TESTBENCH_SRC" && PATH=$CACHE/venv-testbench/bin:$PATH start_one testbench setsid "$CACHE/venv-testbench/bin/python" \
    testbench_run.py 127.0.0.1 "$TESTBENCH_PORT" 10)
  wait_ours testbench "http://127.0.0.1:$TESTBENCH_PORT/" 60
}

stop_all() {
  for pidf in "$RUN"/*.pid; do
    [ -f "$pidf" ] || continue
    local pid; pid=$(cat "$pidf")
    # A server started in a group of its own (the testbench) is ended with
    # its children; the others are single processes.
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    rm -f "$pidf"
    # Wait (at most 10 s) so a tmpfs under it can be unmounted.
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  if [ -f "$RUN/minio-data.mount" ]; then
    umount "$RUN/minio-data" 2>/dev/null || umount -l "$RUN/minio-data" 2>/dev/null || true
    rm -f "$RUN/minio-data.mount"
  fi
}

print_env() {
  cat <<EOT
export STORAGE_EMULATOR_HOST=http://127.0.0.1:$GCS_PORT
export SHOAL_TEST_GCS=http://127.0.0.1:$GCS_PORT
export SHOAL_TEST_S3=http://127.0.0.1:$S3_PORT
export SHOAL_TEST_TOXIPROXY=http://127.0.0.1:$TOXI_PORT
export SHOAL_TEST_S3_KEY=minioadmin
export SHOAL_TEST_S3_SECRET=minioadmin
EOT
  if [ -f "$RUN/moto.pid" ]; then echo "export SHOAL_TEST_MOTO=http://127.0.0.1:$MOTO_PORT"; fi
  if [ -f "$RUN/minio-tls.pid" ]; then
    echo "export SHOAL_TEST_S3_TLS=https://127.0.0.1:$S3TLS_PORT"
    echo "export SHOAL_TEST_CA_BUNDLE=$RUN/minio-tls-certs/ca.crt"
  fi
  # Only when this script started it: tests skip without it.
  if [ -f "$RUN/testbench.pid" ]; then
    echo "export SHOAL_TEST_GCS_TESTBENCH=http://127.0.0.1:$TESTBENCH_PORT"
  fi
  echo "export SHOAL_SHARED=$SHARED"
}

cmd=${1:-}; shift || true
case "$cmd" in
  install)
    install_gcs; install_toxiproxy; install_s3; install_moto
    # Where ../shared has it; the tests that need it skip without it.
    if [ -d "$TESTBENCH_SRC" ]; then install_testbench; fi
    ;;
  start)
    [ $# -gt 0 ] || set -- gcs s3 toxiproxy
    for s in "$@"; do "start_$s"; done
    ;;
  stop) stop_all ;;
  env) print_env ;;
  *) echo "usage: $0 install|start [gcs s3 s3tls toxiproxy gcsemu moto testbench]|stop|env" >&2; exit 2 ;;
esac
