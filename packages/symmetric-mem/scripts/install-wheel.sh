#!/usr/bin/env bash
# Installs NVSHMEM's host library (libnvshmem_host.so.3 and its bootstrap plugins) from the PyPI
# wheel nvidia-nvshmem-cu12 into <repo>/.tools/nvshmem, where the nvshmem backend's loader looks
# first. The library is loaded at run time only (no headers, no link): installing it never makes
# the build depend on CUDA. tools/setup.sh calls this script; it is idempotent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
# The installer ships with @tensorlane/core (its native kit), a peer dependency of this package.
installer="$(cd "$here" && node -p "require.resolve('@tensorlane/core/native-kit/install-wheel.sh')")"
exec bash "$installer" "${NVSHMEM_INSTALL_DIR:-$repo/.tools/nvshmem}" nvidia-nvshmem-cu12==3.8.0 \
  -- nvidia/nvshmem/lib/libnvshmem_host.so.3
