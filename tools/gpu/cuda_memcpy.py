"""The reference of the bandwidth check: cudaMemcpy host to device and device to host, through
ctypes on the CUDA runtime named, from pageable memory (what tensorlane's host tensors are) and from
pinned memory (cudaMallocHost), for each size; the median of `reps` timed copies after one warm-up.
Prints {"<bytes>": {"pageable": {"h2d": GB/s, "d2h": GB/s}, "pinned": {...}}} as JSON.
    python3 cuda_memcpy.py <libcudart> <bytes,bytes,...> <reps>"""
import ctypes
import json
import mmap
import statistics
import sys
import time

H2D, D2H = 1, 2
cuda = ctypes.CDLL(sys.argv[1])
sizes = [int(s) for s in sys.argv[2].split(",")]
reps = int(sys.argv[3])
cuda.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cuda.cudaMallocHost.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cuda.cudaFree.argtypes = [ctypes.c_void_p]
cuda.cudaFreeHost.argtypes = [ctypes.c_void_p]
cuda.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def check(rc, what):
    if rc != 0:
        raise SystemExit(f"{what} failed with CUDA error {rc}")


def gbps(dst, src, n, kind):
    times = []
    for _ in range(reps + 1):
        start = time.perf_counter()
        check(cuda.cudaMemcpy(dst, src, n, kind), "cudaMemcpy")
        times.append(time.perf_counter() - start)
    return n / statistics.median(times[1:]) / 1e9


out = {}
for n in sizes:
    device = ctypes.c_void_p()
    check(cuda.cudaMalloc(ctypes.byref(device), n), "cudaMalloc")
    pageable = mmap.mmap(-1, n)
    view = ctypes.c_char.from_buffer(pageable)
    host = ctypes.addressof(view)
    ctypes.memset(host, 1, n)
    pinned = ctypes.c_void_p()
    check(cuda.cudaMallocHost(ctypes.byref(pinned), n), "cudaMallocHost")
    ctypes.memset(pinned, 1, n)
    out[str(n)] = {
        "pageable": {"h2d": gbps(device, host, n, H2D), "d2h": gbps(host, device, n, D2H)},
        "pinned": {"h2d": gbps(device, pinned, n, H2D), "d2h": gbps(pinned, device, n, D2H)},
    }
    del view
    pageable.close()
    check(cuda.cudaFreeHost(pinned), "cudaFreeHost")
    check(cuda.cudaFree(device), "cudaFree")
print(json.dumps(out))
