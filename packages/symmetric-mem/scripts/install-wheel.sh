#!/usr/bin/env bash
# Installs NVSHMEM's host library (libnvshmem_host.so.3 and its bootstrap plugins) from the PyPI
# wheel nvidia-nvshmem-cu12 into <repo>/.tools/nvshmem, where the nvshmem backend's loader looks
# first. The library is loaded at run time only (no headers, no link): installing it never makes
# the build depend on CUDA. tools/setup.sh calls this script; it is idempotent.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
exec bash "$repo/tools/install-wheel.sh" "${NVSHMEM_INSTALL_DIR:-$repo/.tools/nvshmem}" nvidia-nvshmem-cu12==3.8.0 \
  -- nvidia/nvshmem/lib/libnvshmem_host.so.3
