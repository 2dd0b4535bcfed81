#!/usr/bin/env bash
# Runs every test: unit tests, the conformance suite on all four backends,
# the CLI's end-to-end and bad-input tests, the Python package's tests, the
# release files built and used as a user would (SHOAL_TEST_DIST=1) and
# the benchmark harness at smoke size,
# against local servers this script starts on its own ports and stops again
# (only the ones it started).
#
#   scripts/test.sh              all tests
#   scripts/test.sh -- ARGS      extra arguments for cargo test
#   scripts/test.sh --extended   also 20 s of each cargo-fuzz target (needs a
#                                nightly toolchain and cargo-fuzz; or set
#                                SHOAL_TEST_EXTENDED=1)
set -euo pipefail
cd "$(dirname "$0")/.."

export SHOAL_CACHE=${SHOAL_CACHE:-$HOME/.cache/shoal}
# Own run folder, and free ports (scripts/lib.sh) unless the caller chose.
export SHOAL_RUN_DIR=${SHOAL_RUN_DIR:-$(mktemp -d /tmp/shoal-test.XXXXXX)}
. scripts/lib.sh
# Our servers: fake-gcs-server, MinIO (its console on the next port) and
# toxiproxy; the bench smoke run below starts its own at a block of 60.
# The second MinIO (TLS + KMS key, for encryption tests) takes p+7 and
# its console p+8.
p=$(free_block 9)
export SHOAL_GCS_PORT=${SHOAL_GCS_PORT:-$p}
export SHOAL_S3_PORT=${SHOAL_S3_PORT:-$((p + 2))}
export SHOAL_TOXI_PORT=${SHOAL_TOXI_PORT:-$((p + 4))}
export SHOAL_MOTO_PORT=${SHOAL_MOTO_PORT:-$((p + 5))}
export SHOAL_S3TLS_PORT=${SHOAL_S3TLS_PORT:-$((p + 7))}

cleanup() { scripts/servers.sh stop || true; rm -rf "$SHOAL_RUN_DIR"; }
trap cleanup EXIT

scripts/servers.sh start gcs s3 s3tls toxiproxy moto
# Google's storage-testbench, where ../shared has it (the retry
# conformance tests skip with one line without it): cached venv, a few
# minutes the first time. SHOAL_TESTBENCH=0 leaves it out.
export SHOAL_TESTBENCH_PORT=${SHOAL_TESTBENCH_PORT:-$((p + 6))}
if [ "${SHOAL_TESTBENCH:-1}" = 1 ] && [ -d "${SHOAL_SHARED:-../shared}/tools/storage-testbench" ]; then
  scripts/servers.sh start testbench || failed_testbench=1
fi
eval "$(scripts/servers.sh env)"

# A missing server is a failure, not a skip.
export SHOAL_REQUIRE_SERVERS=1
# Nothing may leave loopback: no cloud metadata servers, no real endpoints.
export AWS_EC2_METADATA_DISABLED=true GCE_METADATA_HOST=127.0.0.1:9 GCE_METADATA_IP=127.0.0.1:9
export NO_PROXY='*'

EXTENDED=${SHOAL_TEST_EXTENDED:-0}
if [ "${1:-}" = "--extended" ]; then EXTENDED=1; shift; fi
[ "${1:-}" = "--" ] && shift

# Every part runs even when an earlier one failed (one failure must never
# hide another); each part's failures are collected and listed at the end.
failures=$SHOAL_RUN_DIR/failures
: > "$failures"
failed_part() { echo "$1" >> "$failures"; }
[ -n "${failed_testbench:-}" ] && failed_part "storage-testbench did not start (scripts/servers.sh start testbench)"

cargo_log=$SHOAL_RUN_DIR/cargo-test.log
set +e
cargo test --workspace --locked --no-fail-fast "$@" 2>&1 | tee "$cargo_log"
cargo_rc=${PIPESTATUS[0]}
set -e
if [ "$cargo_rc" != 0 ]; then
  # Test names that failed, and test binaries that failed as a whole.
  grep -E '^test .* \.\.\. FAILED$' "$cargo_log" | sed 's/^test /cargo: /; s/ \.\.\. FAILED$//' >> "$failures"
  grep -E '^error: (test failed|[0-9]+ targets failed)|^    `-p ' "$cargo_log" | sed 's/^ */cargo: /' >> "$failures"
  grep -q '^cargo: ' "$failures" || failed_part "cargo test (exit $cargo_rc, no test named: a build failure?)"
fi

# Lints as errors on every target (clippy comes with the pinned toolchain).
cargo clippy --workspace --all-targets --locked --quiet -- -D warnings \
  || failed_part "cargo clippy (lints are errors: cargo clippy --workspace --all-targets -- -D warnings)"

# One layout for all Rust code (rustfmt comes with the pinned toolchain).
cargo fmt --all --check >/dev/null \
  || failed_part "cargo fmt (files not formatted: cargo fmt --all, then cargo fmt --all --check)"

# The crate graph in ARCHITECTURE.md is the manifests' own (drawn by
# scripts/crate_graph.py), so the document cannot drift from the code.
python3 scripts/crate_graph.py --check || failed_part "ARCHITECTURE.md crate graph (run scripts/crate_graph.py --write)"
# Modules import one way inside each crate (scripts/module_cycles.py).
python3 scripts/module_cycles.py || failed_part "import cycle between modules (scripts/module_cycles.py)"
# No manifest names a dependency its crate does not use: cargo-machete,
# pinned, built once into $SHOAL_CACHE/tools (about 4 minutes the first time).
machete=$SHOAL_CACHE/tools/bin/cargo-machete
machete_version=0.9.2
if ! "$machete" --version 2>/dev/null | grep -q "$machete_version"; then
  cargo install --quiet --locked --root "$SHOAL_CACHE/tools" "cargo-machete@$machete_version" \
    || failed_part "installing cargo-machete $machete_version"
fi
if [ -x "$machete" ]; then
  "$machete" >"$SHOAL_RUN_DIR/machete.log" 2>&1 \
    || { cat "$SHOAL_RUN_DIR/machete.log"; failed_part "unused dependencies in a manifest (cargo-machete)"; }
fi

# The Python package (python/): pinned tools in a venv cached under
# $SHOAL_CACHE (rebuilt when python/requirements-test.txt changes), the
# extension built by maturin in the dev profile (it reuses the dependencies
# cargo test just built; incremental off, whose stale objects can break the
# cdylib link), then pytest against the same servers. SHOAL_SKIP_PYTHON=1
# leaves it out.
if [ "${SHOAL_SKIP_PYTHON:-0}" != 1 ]; then
  venv=$SHOAL_CACHE/py-venv
  if ! cmp -s python/requirements-test.txt "$venv/.requirements"; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q -r python/requirements-test.txt
    cp python/requirements-test.txt "$venv/.requirements"
  fi
  # One lint and one layout for the repository's Python (python/, bench/,
  # scripts/), as cargo clippy and cargo fmt for the Rust: the rules are
  # python/pyproject.toml's [tool.ruff].
  py_src=(python bench scripts)
  "$venv/bin/ruff" check -q --config python/pyproject.toml "${py_src[@]}" \
    || failed_part "ruff check (lints in the Python: ruff check --config python/pyproject.toml --fix python bench scripts)"
  "$venv/bin/ruff" format -q --check --config python/pyproject.toml "${py_src[@]}" \
    || failed_part "ruff format (files not formatted: ruff format --config python/pyproject.toml python bench scripts)"
  if (cd python && VIRTUAL_ENV=$venv PATH=$venv/bin:$PATH CARGO_INCREMENTAL=0 maturin develop -q); then
    py_log=$SHOAL_RUN_DIR/pytest.log
    set +e
    "$venv/bin/python" -m pytest -q -rfE -p no:cacheprovider python/tests 2>&1 | tee "$py_log"
    py_rc=${PIPESTATUS[0]}
    set -e
    if [ "$py_rc" != 0 ]; then
      grep -E '^(FAILED|ERROR) ' "$py_log" | sed 's/^/pytest: /' >> "$failures"
      grep -q '^pytest: ' "$failures" || failed_part "pytest (exit $py_rc)"
    fi
  else
    failed_part "python: maturin develop failed"
  fi
fi

# What users install (scripts/dist.sh: the static CLI tarball, the wheel,
# the sdist), built in release in $SHOAL_CACHE/dist-target (kept between
# runs: a rerun rebuilds only what changed) into this run's folder, then
# used as a user would by scripts/dist_check.sh on our servers: the binary
# under env -i, the wheel in a fresh venv without Rust on PATH. Opt-in
# (SHOAL_TEST_DIST=1; .ci/run sets it): a cold run is two release builds
# (the musl CLI, the glibc 2.28 wheel), a warm one relinks the project.
if [ "${SHOAL_TEST_DIST:-0}" = 1 ]; then
  dist_start=$SECONDS
  if scripts/dist.sh --out "$SHOAL_RUN_DIR/dist"; then
    scripts/dist_check.sh "$SHOAL_RUN_DIR/dist" || failed_part "dist: scripts/dist_check.sh"
  else
    failed_part "dist: scripts/dist.sh"
  fi
  echo "test.sh: dist.sh + dist_check.sh took $((SECONDS - dist_start)) s"
fi

# The benchmark harness at smoke size (tiny sizes, one run, shoal + s5cmd +
# boto3 on servers of its own, on free ports apart from ours),
# so it cannot rot: it builds the release binaries and installs its peers
# (cached in $SHOAL_CACHE) the first time. SHOAL_SKIP_BENCH_SMOKE=1 leaves
# it out.
if [ "${SHOAL_SKIP_BENCH_SMOKE:-0}" != 1 ]; then
  py=python3
  [ -x "$SHOAL_CACHE/py-venv/bin/python" ] && py=$SHOAL_CACHE/py-venv/bin/python
  SHOAL_BENCH_PORT_BASE=${SHOAL_BENCH_PORT_BASE:-$(free_block 60)} \
    "$py" -m pytest -q -rfE -p no:cacheprovider bench/test_smoke.py || failed_part "bench smoke (bench/test_smoke.py)"
fi

if [ "$EXTENDED" = 1 ]; then
  # Fuzz targets (fuzz/, its own workspace): a short run of each, on a
  # scratch copy of the committed seeds so the run leaves nothing behind.
  for t in glob url s3_list_xml gcs_list_json; do
    corpus=$(mktemp -d "$SHOAL_RUN_DIR/fuzz-$t.XXXXXX")
    cp fuzz/corpus/$t/seed* "$corpus/"
    (cd fuzz && cargo +nightly fuzz run -O "$t" "$corpus" -- -max_total_time="${SHOAL_FUZZ_SECS:-20}") \
      || failed_part "fuzz target $t"
  done
fi

if [ -s "$failures" ]; then
  echo
  echo "test.sh: FAILED ($(wc -l < "$failures") lines):"
  sed 's/^/  /' "$failures"
  exit 1
fi
echo "test.sh: every part passed"
