#!/usr/bin/env bash
# Creates .tools/ray-venv with Ray and torch from PyPI, for tools/bench/ray/compare.mjs. Never part of
# .ci/run: the venv takes about 5.6 GB.
# torch's Linux x86_64 wheel on PyPI is the CUDA build: even on a machine without a GPU, `import torch`
# loads libcudart, cuBLAS, cuDNN, NCCL... from the nvidia-* wheels it depends on (installed with
# --no-deps, torch 2.15.0 fails at import: "libcudart.so.13: cannot open shared object file", then
# "libcublasLt.so.*[0-9] not found"). So torch comes with its dependencies; PyPI has no CPU-only build.
# Idempotent: a venv whose `import ray, torch` works is left alone.
#   bash tools/bench/ray/setup-venv.sh
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
venv="${RAY_VENV:-$repo/.tools/ray-venv}"
ray_version="${RAY_VERSION:-2.60.0}"
torch_version="${TORCH_VERSION:-2.15.0}"
python="$venv/bin/python"

if [[ -x "$python" ]] && "$python" -c "import ray, torch" 2>/dev/null; then
  echo "ray and torch already installed in $venv"
  exit 0
fi
[[ -x "$python" ]] || python3 -m venv "$venv"
"$python" -m pip install --quiet --upgrade pip
# numpy: torch converts through it and warns without it; Ray's serializer uses it for tensors too.
"$python" -m pip install --quiet "ray==$ray_version" "torch==$torch_version" numpy
"$python" -c "import ray, torch; print('ray', ray.__version__, 'torch', torch.__version__, 'in', '$venv')"
