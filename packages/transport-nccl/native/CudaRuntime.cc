#include "CudaRuntime.h"

#include <memory>
#include <mutex>

namespace tensorlane::nccl {

CudaRuntime* CudaRuntime::open(const std::string& path) {
  DynamicLibrary lib(path);
  auto cuda = std::make_unique<CudaRuntime>();
  lib.require(cuda->getDeviceCount, "cudaGetDeviceCount");
  lib.require(cuda->setDevice, "cudaSetDevice");
  lib.require(cuda->driverGetVersion, "cudaDriverGetVersion");
  lib.require(cuda->runtimeGetVersion, "cudaRuntimeGetVersion");
  lib.require(cuda->getErrorString, "cudaGetErrorString");
  lib.require(cuda->malloc, "cudaMalloc");
  lib.require(cuda->free, "cudaFree");
  lib.require(cuda->memcpy, "cudaMemcpy");
  lib.require(cuda->memset, "cudaMemset");
  lib.require(cuda->streamCreateWithFlags, "cudaStreamCreateWithFlags");
  lib.require(cuda->streamQuery, "cudaStreamQuery");
  lib.require(cuda->streamDestroy, "cudaStreamDestroy");
  lib.check("a CUDA runtime (libcudart.so.12)");
  return cuda.release();
}

DeviceProbe CudaRuntime::probe() const {
  // A process's driver and devices do not change while it runs: ask once.
  static std::once_flag once;
  static DeviceProbe cached;
  std::call_once(once, [this] { cached = probeNow(); });
  return cached;
}

DeviceProbe CudaRuntime::probeNow() const {
  DeviceProbe out;
  if (driverGetVersion(&out.driverVersion) != cudaSuccess) out.driverVersion = 0;
  if (runtimeGetVersion(&out.runtimeVersion) != cudaSuccess) out.runtimeVersion = 0;
  out.error = getDeviceCount(&out.count);
  if (out.error != cudaSuccess) {
    out.count = 0;
    const char* text = getErrorString(out.error);
    out.errorText = text != nullptr ? text : "cuda error " + std::to_string(out.error);
  }
  return out;
}

std::string CudaRuntime::absence(int device) const {
  DeviceProbe p = probe();
  if (p.driverVersion == 0) {
    return "no NVIDIA driver is installed (cudaDriverGetVersion reports none" +
           (p.errorText.empty() ? std::string(")") : "; cudaGetDeviceCount: " + p.errorText + ")");
  }
  if (p.count == 0) return "no CUDA device is visible" + (p.errorText.empty() ? std::string() : " (cudaGetDeviceCount: " + p.errorText + ")");
  if (device < 0 || device >= p.count) {
    return "cuda:" + std::to_string(device) + " does not exist: this process sees " + std::to_string(p.count) +
           " CUDA device(s) (CUDA_VISIBLE_DEVICES narrows them)";
  }
  return std::string();
}

void CudaRuntime::useDevice(int device) const {
  const std::string missing = absence(device);
  if (!missing.empty()) throw Failure(FailureCode::NoDevice, missing);
  check(setDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
}

void CudaRuntime::check(cudaError_t error, const std::string& what) const {
  if (error == cudaSuccess) return;
  const char* text = getErrorString(error);
  throw Failure(FailureCode::Cuda, what + " failed: " + (text != nullptr ? text : "cuda error " + std::to_string(error)));
}

}  // namespace tensorlane::nccl
