#!/usr/bin/env bash
# Checks what scripts/dist.sh built, used as a user without Rust would:
#
# - SHA256SUMS matches the files;
# - the CLI tarball holds the binary, LICENSE, README, the man page and
#   completions, and the binary, run with an empty environment (env -i: no
#   PATH, HOME, proxy or credential variables), prints its version and
#   copies, lists and reads back against the local GCS server, named
#   `localhost` so the static binary's own name resolution is used;
# - the wheel installs (binary only: pip may not build anything) into a
#   fresh venv whose PATH has no cargo or rustc, and scripts/dist_check.py
#   copies, lists and reads through fsspec with it against both servers.
#
#   scripts/dist_check.sh DIR    DIR: dist.sh's output (default dist/)
#
# Needs the servers running and SHOAL_TEST_GCS / SHOAL_TEST_S3 set, as
# scripts/test.sh does (it runs this); or by hand:
#   scripts/servers.sh start gcs s3 && eval "$(scripts/servers.sh env)"
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=$(cd "${1:-dist}" && pwd)

die() { echo "dist_check: $*" >&2; exit 1; }
[ -n "${SHOAL_TEST_GCS:-}" ] && [ -n "${SHOAL_TEST_S3:-}" ] \
  || die "SHOAL_TEST_GCS and SHOAL_TEST_S3 are not set: start the servers (scripts/servers.sh start gcs s3; eval \"\$(scripts/servers.sh env)\")"

(cd "$dir" && sha256sum --quiet -c SHA256SUMS) || die "$dir/SHA256SUMS does not match its files"
echo "dist_check: SHA256SUMS matches"

work=$(mktemp -d /tmp/shoal-dist-check.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The CLI, from its tarball.
tarball=$(ls "$dir"/shoal-*-x86_64-linux.tar.gz) || die "no shoal-*-x86_64-linux.tar.gz in $dir"
tar -xzf "$tarball" -C "$work"
pkg=$(ls -d "$work"/shoal-*-x86_64-linux)
for f in shoal LICENSE README.md man/shoal.1 completions/shoal.bash completions/_shoal completions/shoal.fish; do
  [ -s "$pkg/$f" ] || die "$(basename "$tarball") has no $f"
done
bin=$pkg/shoal
version_line=$(env -i "$bin" --version) || die "env -i $bin --version failed"
echo "dist_check: env -i shoal --version: $version_line"
version=$(echo "$version_line" | cut -d' ' -f2)
case "$version_line" in
  "shoal $version (commit "*")") ;;
  *) die "'shoal --version' printed '$version_line', not 'shoal VERSION (commit ...)'" ;;
esac
gcs=${SHOAL_TEST_GCS/127.0.0.1/localhost}
bucket=gs://distbin-$(od -An -N5 -tx1 /dev/urandom | tr -d ' \n')
shoal_bare() { env -i "$bin" --no-sign-request --gcs-endpoint-url "$gcs" "$@"; }
head -c 1048583 /dev/urandom > "$work/one.bin"
shoal_bare mb "$bucket" || die "env -i shoal mb $bucket (endpoint $gcs) failed"
shoal_bare -q cp "$work/one.bin" "$bucket/d/one.bin" || die "env -i shoal cp to $bucket failed"
listed=$(shoal_bare ls -r "$bucket/")
[ "$listed" = "$bucket/d/one.bin" ] || die "env -i shoal ls -r $bucket/ printed '$listed'"
shoal_bare -q cp "$bucket/d/one.bin" "$work/back.bin" || die "env -i shoal cp from $bucket failed"
cmp -s "$work/one.bin" "$work/back.bin" || die "the static binary's copy back differs"
shoal_bare -q rm -r "$bucket/" && shoal_bare -q rb "$bucket" || die "env -i shoal rm/rb $bucket failed"
echo "dist_check: env -i shoal: mb, cp up, ls -r, cp down (same bytes), rm -r, rb via $gcs"

# The wheel, in a fresh venv, with a PATH that has no Rust.
wheel=$(ls "$dir"/shoal-*-abi3-manylinux_2_28_x86_64.whl) || die "no manylinux_2_28 abi3 wheel in $dir"
python=$(command -v python3)
"$python" -m venv "$work/venv"
clean_path=$work/venv/bin:/usr/local/bin:/usr/bin:/bin
for tool in cargo rustc; do
  if PATH=$clean_path command -v "$tool" >/dev/null; then
    die "$tool is in $(PATH=$clean_path command -v "$tool"): the wheel check needs a PATH without Rust"
  fi
done
PATH=$clean_path "$work/venv/bin/pip" install -q --disable-pip-version-check --only-binary=:all: "$wheel[fsspec]" \
  || die "pip install $(basename "$wheel")[fsspec] failed in a fresh venv"
(cd "$work" && PATH=$clean_path SHOAL_EXPECT_VERSION=$version "$work/venv/bin/python" "$root/scripts/dist_check.py") \
  || die "the installed wheel failed scripts/dist_check.py (output above)"
# The extension is stripped (pyproject's [tool.maturin] strip): with the
# release profile's debug info it was 131 MB installed, stripped 27 MB.
so=$(ls "$work"/venv/lib/python3*/site-packages/shoal/_shoal*.so) || die "no extension module installed"
so_mb=$(( $(stat -c %s "$so") / 1048576 ))
echo "dist_check: wheel $(( $(stat -c %s "$wheel") / 1048576 )) MiB, extension ${so_mb} MiB installed"
[ "$so_mb" -lt 64 ] || die "the installed extension is ${so_mb} MiB: not stripped? (pyproject [tool.maturin] strip)"
echo "dist_check: every check passed"
