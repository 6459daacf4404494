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
  libxml2-dev libxml2-utils
  # SSH targets
  openssh-client iproute2
  # tests: temperd's metrics read back by Prometheus's own text parser; exported checklists read by
  # STIG Manager's own parsers (node, below); the dashboard in a headless browser
  python3-prometheus-client nodejs chromium
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

# tests: STIG Manager's import parsers, pinned, from the npm registry into the build tree
# (tests/consumers/stig_manager_import.cjs runs them on temper's CKL, CKLB and XCCDF exports).
stigman_modules=@nuwcdivnpt/stig-manager-client-modules
stigman_version=1.6.7
test_tools=$build_dir/test-tools
if ! grep -qs "\"version\": \"$stigman_version\"" "$test_tools/node_modules/$stigman_modules/package.json"; then
  command -v npm >/dev/null || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm
  echo "setup: installing $stigman_modules@$stigman_version for the tests"
  mkdir -p "$test_tools"
  npm install --prefix "$test_tools" --no-audit --no-fund --no-save --ignore-scripts \
    "$stigman_modules@$stigman_version" >/dev/null
fi

# Hash paths relative to the checkout, so a fresh clone elsewhere (CI) reuses the compiler cache.
export CCACHE_BASEDIR="$repo" CCACHE_NOHASHDIR=1

cuda_args=()
if [ -z "${TEMPER_NO_CUDA:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  cuda_args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi

cmake -S "$repo" -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE="$build_type" \
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache \
  "${cuda_args[@]}"
cmake --build "$build_dir"
