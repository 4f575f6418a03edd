"""The reference of the bandwidth check: cudaMemcpy host to device and device to host, through
ctypes on the CUDA runtime named, from pageable memory (what tensorlane's host tensors are) and from
pinned memory (cudaMallocHost), and into a destination allocated for each copy ("fresh": cudaMalloc,
or an anonymous mapping whose pages the copy faults in, as a new host tensor's are), for each size;
with PyTorch importable, its `.to` both ways too (the peer of `Tensor.to`). The median of `reps`
timed copies after one warm-up. Prints {"<bytes>": {"pageable": {"h2d": GB/s, "d2h": GB/s},
"pinned": {...}, "fresh": {...}, "torch": {...} or null}} as JSON.
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


def timed(n, run):
    times = []
    for _ in range(reps + 1):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return n / statistics.median(times[1:]) / 1e9


def gbps(dst, src, n, kind):
    return timed(n, lambda: check(cuda.cudaMemcpy(dst, src, n, kind), "cudaMemcpy"))


def to_fresh_device(src, n):
    dst = ctypes.c_void_p()
    check(cuda.cudaMalloc(ctypes.byref(dst), n), "cudaMalloc")
    check(cuda.cudaMemcpy(dst, src, n, H2D), "cudaMemcpy")
    check(cuda.cudaFree(dst), "cudaFree")


def fresh_host_rate(src, n):
    """Into a new mapping per copy, unmapped after the timing (a result's free is not the copy's)."""
    made = []

    def copy():
        dst = mmap.mmap(-1, n)
        check(cuda.cudaMemcpy(ctypes.addressof(ctypes.c_char.from_buffer(dst)), src, n, D2H), "cudaMemcpy")
        made.append(dst)

    rate = timed(n, copy)
    for dst in made:
        dst.close()
    return rate


def torch_rates(n):
    """PyTorch's `.to` both ways, or None where python3 has no torch that reaches the GPU."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
    except Exception as error:
        print(f"no PyTorch peer: {error}", file=sys.stderr)
        return None
    host = torch.ones(n, dtype=torch.uint8)
    device = host.to("cuda:0")

    def h2d():
        host.to("cuda:0")
        torch.cuda.synchronize()

    return {"h2d": timed(n, h2d), "d2h": timed(n, lambda: device.to("cpu"))}


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
        "fresh": {"h2d": timed(n, lambda: to_fresh_device(host, n)), "d2h": fresh_host_rate(device, n)},
        "torch": torch_rates(n),
    }
    del view
    pageable.close()
    check(cuda.cudaFreeHost(pinned), "cudaFreeHost")
    check(cuda.cudaFree(device), "cudaFree")
print(json.dumps(out))
