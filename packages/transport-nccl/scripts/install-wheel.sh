#!/usr/bin/env bash
# Installs libnccl.so.2 (wheel nvidia-nccl-cu12) and the CUDA runtime libcudart.so.12 (wheel
# nvidia-cuda-runtime-cu12) into <repo>/.tools/nccl, where the transport's loader looks first
# (nvidia/nccl/lib and nvidia/cuda_runtime/lib). The addon needs no headers: it dlopens both
# libraries at run time. --no-deps: nothing of the Python side is needed. Idempotent: installed
# matching versions are left alone. tools/setup.sh calls this script.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
target="${TENSORLANE_NCCL_INSTALL_DIR:-$repo/.tools/nccl}"
nccl_version="2.28.9"
cudart_version="12.9.79"
nccl_lib="$target/nvidia/nccl/lib/libnccl.so.2"
cudart_lib="$target/nvidia/cuda_runtime/lib/libcudart.so.12"

if [[ -f "$nccl_lib" && -f "$cudart_lib" \
  && -d "$target/nvidia_nccl_cu12-$nccl_version.dist-info" \
  && -d "$target/nvidia_cuda_runtime_cu12-$cudart_version.dist-info" ]]; then
  echo "nvidia-nccl-cu12 $nccl_version and nvidia-cuda-runtime-cu12 $cudart_version already installed in $target"
  exit 0
fi
python3 -m pip install --quiet --no-deps --upgrade --target "$target" \
  "nvidia-nccl-cu12==$nccl_version" "nvidia-cuda-runtime-cu12==$cudart_version"
for lib in "$nccl_lib" "$cudart_lib"; do
  [[ -f "$lib" ]] || { echo "wheels installed, but $lib is missing: the wheel's layout changed" >&2; exit 1; }
done
echo "nvidia-nccl-cu12 $nccl_version and nvidia-cuda-runtime-cu12 $cudart_version installed in $target"
