#!/usr/bin/env bash
# Builds what a user installs without a Rust toolchain, into dist/:
#
#   shoal-VERSION-x86_64-linux.tar.gz  the CLI as one static binary (musl,
#                                      no glibc needed), LICENSE, README, the
#                                      man page and shell completions
#   shoal-VERSION-cp310-abi3-manylinux_2_28_x86_64.whl
#                                      the Python package, any CPython >= 3.10
#                                      on any glibc >= 2.28 (maturin's own
#                                      manylinux check passes on it)
#   shoal-VERSION.tar.gz               the Python sdist (needs Rust to build)
#   SHA256SUMS
#
#   scripts/dist.sh [--out DIR]        DIR instead of dist/
#
# Both builds link with zig from PyPI (ziglang, through cargo-zigbuild and
# maturin --zig): it brings the musl C toolchain the C dependencies (aws-lc,
# zstd) need, and glibc 2.28's symbols for the wheel, whatever this
# machine's glibc is (2.28: the oldest glibc still supported by the
# distributions people run, Debian 10 and RHEL 8). Zig rather than a
# manylinux container or musl-gcc: it needs only Python and pip, which the
# project needs anyway. The musl build keeps musl's allocator (the
# `mallopt` tuning in shoal-cli's main is glibc-only).
# Those tools live in a venv in $SHOAL_CACHE/dist-tools
# (pinned by scripts/dist-requirements.txt), the release builds in
# $SHOAL_CACHE/dist-target and dist-target-wheel, so a second run on the same machine only
# relinks what changed. Everything is made in a staging folder next to the
# output and moved there at the end: a failed run leaves the previous
# output as it was and no half-written file.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

out=$root/dist
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=${2:?dist.sh: --out needs a folder}; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "dist.sh: unknown argument '$1' (see 'scripts/dist.sh --help')" >&2; exit 2 ;;
  esac
done
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")

export SHOAL_CACHE=${SHOAL_CACHE:-$HOME/.cache/shoal}
# One target dir per build: they share no artifact (other targets, other
# linkers), and one cargo holds a target dir's host build folder locked
# for the whole of its build.
targets=${SHOAL_DIST_TARGET_DIR:-$SHOAL_CACHE/dist-target}
MUSL=x86_64-unknown-linux-musl

die() { echo "dist.sh: $*" >&2; exit 1; }

# What this machine must have, and how to get it.
need() { # tool, how to get it
  command -v "$1" >/dev/null || die "$1 is missing: $2"
}
need cargo "install Rust with rustup (rust-toolchain.toml pins the version)"
need rustup "install Rust with rustup (it adds the $MUSL target)"
need python3 "install Python 3.10 or later with its venv module (Debian: apt-get install python3 python3-venv)"
need tar "install GNU tar (Debian: apt-get install tar)"
need gzip "install gzip (Debian: apt-get install gzip)"
need sha256sum "install GNU coreutils (Debian: apt-get install coreutils)"
python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))' 2>/dev/null \
  || die "python3 ($(command -v python3)) must be 3.10 or later with the venv and ensurepip modules (Debian: apt-get install python3-venv)"

# The musl target's standard library, once per toolchain.
if ! rustup target list --installed | grep -qx "$MUSL"; then
  echo "dist.sh: adding the Rust target $MUSL"
  rustup target add "$MUSL" >&2 || die "the Rust target $MUSL is missing and 'rustup target add $MUSL' failed: run it where rustup can download"
fi

# maturin, zig and cargo-zigbuild, pinned, rebuilt when the pins change.
tools=$SHOAL_CACHE/dist-tools
if ! cmp -s scripts/dist-requirements.txt "$tools/.requirements"; then
  echo "dist.sh: installing maturin, ziglang and cargo-zigbuild from PyPI into $tools"
  rm -rf "$tools"
  python3 -m venv "$tools" || die "python3 -m venv $tools failed (Debian: apt-get install python3-venv)"
  "$tools/bin/pip" install -q -r scripts/dist-requirements.txt \
    || { rm -rf "$tools"; die "pip could not install scripts/dist-requirements.txt (maturin, ziglang, cargo-zigbuild): PyPI must be reachable (or PIP_INDEX_URL set to a mirror)"; }
  cp scripts/dist-requirements.txt "$tools/.requirements"
fi
# python3 first on PATH is the tools venv's, where cargo-zigbuild and
# maturin find zig (`python3 -m ziglang`).
export PATH=$tools/bin:$PATH

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
[ -n "$version" ] || die "no version = \"...\" in Cargo.toml's [workspace.package]"
# The commit built from, for `shoal --version` and shoal.__commit__ (the
# crates' build.rs); `-dirty` when the tree has uncommitted changes.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  commit=$(git rev-parse --short=12 HEAD)
  git diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
  export SHOAL_BUILD_COMMIT=$commit
  # Timestamps inside the tarballs: the commit's, so a rebuild of the same
  # commit gives the same bytes (as far as the compilers allow).
  export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
else
  echo "dist.sh: no git metadata here: the builds will say 'commit unknown'" >&2
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(date +%s)}

stage=$(mktemp -d "$(dirname "$out")/.dist-staging.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/out"

# 1. The CLI: musl, statically linked (Rust's default for this target).
export CARGO_TARGET_DIR=$targets
echo "dist.sh: building the CLI for $MUSL (release, target dir $CARGO_TARGET_DIR)"
cargo zigbuild --release --locked -p shoal-cli --target "$MUSL" \
  || die "the release build of the CLI for $MUSL failed (output above)"
bin=$CARGO_TARGET_DIR/$MUSL/release/shoal
# Static means no program interpreter (ld.so) to look for at run time.
python3 - "$bin" <<'EOF' || die "$bin is not a static executable"
import struct, sys
with open(sys.argv[1], "rb") as f:
    h = f.read(64)
    assert h[:4] == b"\x7fELF" and h[4] == 2, "not a 64-bit ELF file"
    phoff, = struct.unpack_from("<Q", h, 32)
    phentsize, phnum = struct.unpack_from("<HH", h, 54)
    f.seek(phoff)
    ph = f.read(phentsize * phnum)
types = [struct.unpack_from("<I", ph, i * phentsize)[0] for i in range(phnum)]
sys.exit(3 in types)  # PT_INTERP
EOF
name=shoal-$version-x86_64-linux
pkg=$stage/$name
mkdir -p "$pkg/man" "$pkg/completions"
# Without the release profile's line tables (they are for profiling
# here, and make the static binary ~110 MiB): strip when binutils are
# there, else ship it as built.
if command -v strip >/dev/null; then
  strip -o "$pkg/shoal" "$bin" || die "strip $bin failed"
else
  echo "dist.sh: no strip (binutils): the binary keeps its line tables" >&2
  cp "$bin" "$pkg/shoal"
fi
cp LICENSE README.md "$pkg/"
"$pkg/shoal" man > "$pkg/man/shoal.1"
"$pkg/shoal" completions bash > "$pkg/completions/shoal.bash"
"$pkg/shoal" completions zsh > "$pkg/completions/_shoal"
"$pkg/shoal" completions fish > "$pkg/completions/shoal.fish"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
  -C "$stage" -cf - "$name" | gzip -n > "$stage/out/$name.tar.gz"

# 2. The wheel: abi3 (pyo3's abi3-py310), linked by zig against glibc 2.28;
# maturin refuses to tag it manylinux_2_28 if any symbol needs a newer one.
export CARGO_TARGET_DIR=$targets-wheel
echo "dist.sh: building the Python wheel (manylinux_2_28, abi3; target dir $CARGO_TARGET_DIR)"
(cd python && maturin build --release --locked --zig --compatibility manylinux_2_28 \
  --target x86_64-unknown-linux-gnu --out "$stage/out") \
  || die "the wheel build failed (output above)"
# 3. The sdist: the crates the package needs, built by pip with Rust.
(cd python && maturin sdist --out "$stage/out") || die "the sdist build failed (output above)"

ls "$stage/out"/*.whl >/dev/null 2>&1 || die "maturin wrote no wheel into $stage/out"
(cd "$stage/out" && sha256sum -- * > SHA256SUMS)

# Swap the whole folder in: the old output stays until the new one is
# complete, and nothing of an older version lingers beside it.
if [ -e "$out" ]; then
  mv "$out" "$stage/old"
fi
mv "$stage/out" "$out"
echo "dist.sh: built into $out:"
(cd "$out" && ls -l -- *)
