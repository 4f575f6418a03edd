"""tensorlane bench's scenario on Ray Direct Transport, for tools/bench/ray/compare.mjs.

The producer returns torch.full((n // 4,), 1.0, dtype=torch.float32) for n bytes, the consumer returns
t.numel(); the time is submit to result, ray.get(consumer.numel.remote(producer.make.remote(n))),
median of `repeats` after `warmups`. Paths: RDT over Gloo (a torch_gloo collective group) and Ray's
object store (no tensor_transport). Prints JSON on stdout.

  .tools/ray-venv/bin/python tools/bench/ray/ray_bench.py --sizes 4096,67108864 --repeats 7 --warmups 2
"""
import argparse
import json
import os
import statistics
import time

import ray
import torch
from ray.experimental.collective import create_collective_group, destroy_collective_group


# One class for both roles, as in Ray's RDT examples: Ray runs the receiving side of an RDT transfer in
# a system concurrency group that it gives only to classes with a tensor_transport method (a consumer
# class without one waits for the tensor forever, found with Ray 2.58 and 2.60).
@ray.remote
class Worker:
    def make(self, n):
        return torch.full((n // 4,), 1.0, dtype=torch.float32)

    @ray.method(tensor_transport="gloo")
    def make_gloo(self, n):
        return torch.full((n // 4,), 1.0, dtype=torch.float32)

    def numel(self, t):
        return t.numel()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", required=True, help="bytes, comma-separated")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmups", type=int, default=2)
    # compare.mjs passes tensorlane's figures (its bench JSON's steadyCalls), one per size.
    parser.add_argument("--steady-calls", default="32", help="calls of each size before timing it, comma-separated, or one for all")
    parser.add_argument("--temp-dir", help="Ray's session folder (compare.mjs: inside its own, which it removes); default Ray's /tmp/ray")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    steady = [int(s) for s in args.steady_calls.split(",")]
    steady = steady * len(sizes) if len(steady) == 1 else steady
    if len(steady) != len(sizes):
        parser.error(f"--steady-calls names {len(steady)} sizes' calls, --sizes {len(sizes)} sizes")

    # Loopback only: the node's address and Gloo's interface (actor processes inherit the environment).
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    ray.init(
        _node_ip_address="127.0.0.1",
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        **({"_temp_dir": args.temp_dir} if args.temp_dir else {}),
    )
    producer, consumer = Worker.remote(), Worker.remote()
    group = create_collective_group([producer, consumer], backend="torch_gloo")
    paths = {"ray-rdt-gloo": producer.make_gloo, "ray-object-store": producer.make}
    rows = []

    def call(path, make, n):
        t0 = time.perf_counter()
        numel = ray.get(consumer.numel.remote(make.remote(n)))
        ms = (time.perf_counter() - t0) * 1e3
        if numel != n // 4:
            raise RuntimeError(f"{path}: the consumer saw {numel} elements, {n // 4} expected")
        return ms

    for n, steady_calls in zip(sizes, steady):
        # Warm-ups as tensorlane's bench runs them: each path's, in turn, and more rounds until the
        # size has been made its --steady-calls times.
        for _ in range(max(args.warmups, -(-steady_calls // len(paths)))):
            for path, make in paths.items():
                call(path, make, n)
        for path, make in paths.items():
            samples = [call(path, make, n) for _ in range(args.repeats)]
            median = statistics.median(samples)
            rows.append({"path": path, "bytes": n, "medianMs": median, "gbps": n / median / 1e6, "samplesMs": samples})
    destroy_collective_group(group)
    ray.shutdown()
    print(json.dumps({"ray": ray.__version__, "torch": torch.__version__, "repeats": args.repeats, "warmups": args.warmups, "rows": rows}))


if __name__ == "__main__":
    main()
