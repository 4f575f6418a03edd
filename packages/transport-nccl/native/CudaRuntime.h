// The CUDA runtime (libcudart.so.12), loaded once per process like NcclLibrary. Device memory of
// tensors comes from it, and every NCCL operation runs on one of its streams.
#pragma once

#include "NcclApi.h"

#include <tensorlane/DynamicLibrary.h>

#include <string>

namespace tensorlane::nccl {

/** What the runtime says about this machine's GPUs. */
struct DeviceProbe {
  int count = 0;
  int driverVersion = 0;
  int runtimeVersion = 0;
  /** cudaGetDeviceCount's error, or cudaSuccess. */
  cudaError_t error = cudaSuccess;
  std::string errorText;
};

class CudaRuntime : public ProcessLibrary<CudaRuntime> {
 public:
  static constexpr const char* kName = "the CUDA runtime";

  cudaGetDeviceCount_fn getDeviceCount = nullptr;
  cudaSetDevice_fn setDevice = nullptr;
  cudaDriverGetVersion_fn driverGetVersion = nullptr;
  cudaRuntimeGetVersion_fn runtimeGetVersion = nullptr;
  cudaGetErrorString_fn getErrorString = nullptr;
  cudaMalloc_fn malloc = nullptr;
  cudaFree_fn free = nullptr;
  cudaMemcpy_fn memcpy = nullptr;
  cudaMemset_fn memset = nullptr;
  cudaStreamCreateWithFlags_fn streamCreateWithFlags = nullptr;
  cudaStreamQuery_fn streamQuery = nullptr;
  cudaStreamDestroy_fn streamDestroy = nullptr;

  /** Opens `path` with every entry point (ProcessLibrary::load calls it once per process). */
  static CudaRuntime* open(const std::string& path);

  DeviceProbe probe() const;

  /**
   * Makes `device` current on the calling thread (CUDA's current device is per thread); a NoDevice
   * failure saying why when the machine has no driver, no device, or not that one.
   */
  void useDevice(int device) const;

  /** Why `device` cannot be used (no driver, no device, not that one), or "" when it exists. */
  std::string absence(int device) const;

  /** Throws a Cuda failure naming `what` unless `error` is cudaSuccess. */
  void check(cudaError_t error, const std::string& what) const;

 private:
  DeviceProbe probeNow() const;
};

}  // namespace tensorlane::nccl
