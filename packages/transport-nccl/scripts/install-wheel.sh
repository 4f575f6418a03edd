#!/usr/bin/env bash
# Installs libnccl.so.2 (wheel nvidia-nccl-cu12) and the CUDA runtime libcudart.so.12 (wheel
# nvidia-cuda-runtime-cu12) into <repo>/.tools/nccl, where the transport's loader looks first
# (nvidia/nccl/lib and nvidia/cuda_runtime/lib). The addon needs no headers: it dlopens both
# libraries at run time. tools/setup.sh calls this script; it is idempotent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
# The installer ships with @tensorlane/core (its native kit), a peer dependency of this package.
installer="$(cd "$here" && node -p "require.resolve('@tensorlane/core/native-kit/install-wheel.sh')")"
exec bash "$installer" "${TENSORLANE_NCCL_INSTALL_DIR:-$repo/.tools/nccl}" \
  nvidia-nccl-cu12==2.28.9 nvidia-cuda-runtime-cu12==12.9.79 \
  -- nvidia/nccl/lib/libnccl.so.2 nvidia/cuda_runtime/lib/libcudart.so.12
