#!/usr/bin/env bash
# Creates .tools/ray-venv with Ray and a CPU-usable torch from PyPI, for tools/bench/ray/compare.mjs.
# Never part of .ci/run: even without its CUDA libraries torch is about 1 GB.
# torch's Linux x86_64 wheel on PyPI is the CUDA build, and its nvidia-* dependencies add several GB;
# so torch is installed with --no-deps, then only the dependencies it declares that are not NVIDIA's
# (nvidia-*, cuda-*, triton). Idempotent: a venv whose `import ray, torch` works is left alone.
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
"$python" -m pip install --quiet "ray==$ray_version"
"$python" -m pip install --quiet --no-deps "torch==$torch_version"
# torch's own requirements, less NVIDIA's libraries and triton (GPU kernels), whose markers apply here.
mapfile -t deps < <("$python" - <<'PY'
from importlib.metadata import requires
from packaging.requirements import Requirement
for line in requires("torch") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name.startswith(("nvidia-", "cuda-")) or req.name == "triton":
        continue
    print(str(req).split(";")[0])
PY
)
if ((${#deps[@]} > 0)); then "$python" -m pip install --quiet "${deps[@]}"; fi
"$python" -c "import ray, torch; print('ray', ray.__version__, 'torch', torch.__version__, 'in', '$venv')"
