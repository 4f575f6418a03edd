/**
 * VRAM: tensors on cuda:N are registered and read as VRAM_SEG on device N. The descriptor choice
 * is checked everywhere (a storage that only describes device memory); moving real device memory
 * needs a GPU and a CUDA allocator (@tensorlane/transport-nccl registers one), and is skipped
 * without a GPU.
 */
import * as fs from "node:fs"
import { type Allocator, type Storage, Tensor } from "@tensorlane/core"
import { currentAllocator, nextStorageId } from "@tensorlane/core/plugin"
import { describe, expect, it } from "vitest"
import { type NixlMetadata, nixl } from "../src/index.js"
import { storageMemory, tensorMemory } from "../src/internal/memory.js"

const hasGpu = fs.existsSync("/dev/nvidia0")

/** Device memory that is never touched: enough to check which NIXL segment a tensor maps to. */
const describedOnly = (device: `cuda:${number}`, address: bigint | undefined): Allocator => {
  const allocator: Allocator = {
    name: "described-only",
    device,
    allocate: (byteLength): Storage => ({
      id: nextStorageId(),
      device,
      byteLength,
      get bytes(): Uint8Array {
        throw new Error("no host bytes")
      },
      handle: address === undefined ? undefined : { address },
      allocator,
    }),
    free: () => undefined,
  }
  return allocator
}

describe("segment choice by device", () => {
  it("cpu tensors are DRAM_SEG, cuda:N tensors are VRAM_SEG on device N at handle.address + offset", () => {
    const host = Tensor.zeros([4])
    expect(storageMemory(host.storage).mem).toBe("dram")
    const device = Tensor.empty([4, 4], { allocator: describedOnly("cuda:1", 0x7000_0000n) })
    expect(storageMemory(device.storage)).toEqual({ mem: "vram", device: 1, address: 0x7000_0000n, length: 64 })
    expect(tensorMemory(device.row(2))).toEqual({ mem: "vram", device: 1, address: 0x7000_0000n + 32n, length: 16 })
  })

  it("a cuda storage without a device address is refused with a DeviceError", () => {
    const storage = describedOnly("cuda:0", undefined).allocate(16)
    expect(() => storageMemory(storage)).toThrow(/device address/)
  })
})

describe.skipIf(!hasGpu)("VRAM on a real GPU", () => {
  it("registers a cuda tensor as VRAM and describes it for consumers", async () => {
    await import("@tensorlane/transport-nccl" as string)
    const t = Tensor.ones([1 << 20], { allocator: currentAllocator("cuda:0") })
    const metadata = (await nixl.extractMetadata!({ objectId: "gpu1", tensors: [t] })) as NixlMetadata
    expect(metadata.regions[0]).toMatchObject({ mem: "vram", device: 0 })
    await nixl.release!({ objectId: "gpu1", tensors: [t] })
    expect(nixl.inspect!().registrations).toEqual([])
  })
})
