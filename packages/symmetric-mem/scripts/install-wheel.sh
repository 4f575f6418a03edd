#!/usr/bin/env bash
# Installs NVSHMEM's host library (libnvshmem_host.so.3 and its bootstrap plugins) from the PyPI
# wheel nvidia-nvshmem-cu12 into <repo>/.tools/nvshmem, where the nvshmem backend's loader looks
# first. --no-deps: nothing else of the wheel's Python world is needed. The library is loaded at
# run time only (no headers, no link): installing it never makes the build depend on CUDA.
# Idempotent: an installed matching version is left alone. tools/setup.sh calls this script.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
target="${NVSHMEM_INSTALL_DIR:-$repo/.tools/nvshmem}"
version="3.8.0"
lib="$target/nvidia/nvshmem/lib/libnvshmem_host.so.3"

if [[ -f "$lib" && -d "$target/nvidia_nvshmem_cu12-$version.dist-info" ]]; then
  echo "nvidia-nvshmem-cu12 $version already installed in $target"
  exit 0
fi
python3 -m pip install --quiet --no-deps --upgrade --target "$target" "nvidia-nvshmem-cu12==$version"
[[ -f "$lib" ]] || { echo "nvidia-nvshmem-cu12 installed, but $lib is missing: the wheel's layout changed" >&2; exit 1; }
echo "nvidia-nvshmem-cu12 $version installed in $target"
