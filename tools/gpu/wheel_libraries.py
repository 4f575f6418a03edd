"""Finds the NVIDIA libraries that tensorlane's GPU checks load among this Python's installed wheels,
by each wheel's own list of files rather than by guessed paths, and prints them as one JSON object:
{"nccl": [{"path", "dist", "version"}, ...], "cudart": [...], "nvshmem": [...], "cudaDriver": path, ...},
every wheel's copy of each library, the newest CUDA's first."""
import ctypes
import json
import os
import sys
from importlib import metadata

WANTED = {
    "nccl": (("libnccl.so.2",), ("nvidia-nccl-cu13", "nvidia-nccl-cu12")),
    "cudart": (("libcudart.so.13", "libcudart.so.12"), ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12")),
    "nvshmem": (("libnvshmem_host.so.3",), ("nvidia-nvshmem-cu13", "nvidia-nvshmem-cu12")),
}
OTHERS = ("torch",)


def find(names, dists):
    found = []
    for dist in dists:
        try:
            wheel = metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            continue
        for file in wheel.files or []:
            if file.name in names:
                path = os.path.realpath(wheel.locate_file(file))
                if os.path.isfile(path):
                    found.append({"path": path, "dist": dist, "version": wheel.version})
    return found


def cuda_driver():
    """The libcuda.so.1 the dynamic loader finds, read from where it was mapped; None without one."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libcuda.so"):
                return path
    return None


def version(dist):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


out = {"python": sys.version.split()[0], "executable": sys.executable}
for key, (names, dists) in WANTED.items():
    out[key] = find(names, dists)
out["cudaDriver"] = cuda_driver()
out["packages"] = {dist: version(dist) for dist in OTHERS}
print(json.dumps(out))
