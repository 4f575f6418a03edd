// The CUDA driver API (libcuda.so.1), dlopened on demand for one thing: making the device asked for
// current on the calling thread right before NVSHMEM initializes, which is what cudaSetDevice does.
// NVSHMEM takes its device from the current context; with none, its init stops after the bootstrap
// (NVSHMEMX_ERROR_GPU_NOT_SELECTED, status IS_BOOTSTRAPPED) and waits for a device to be set.
#pragma once

#include <napi.h>

#include <mutex>
#include <string>

namespace tensorlane::symmetric {

struct DeviceProbe {
  bool usable = false;
  /** The devices the driver sees; -1 when the driver did not load or initialize. */
  int deviceCount = -1;
  /** Why the device cannot be used, when it cannot. */
  std::string reason;
};

class CudaDriver {
 public:
  static CudaDriver& instance();

  /** Loads `path` (the first path that loads stays for the process), initializes the driver and checks that `ordinal` exists. */
  DeviceProbe probe(const std::string& path, int ordinal);
  /** Makes `ordinal`'s primary context current on this thread (after a probe that found it usable); empty, else why not. */
  std::string makeCurrent(int ordinal);
  /** The device of this thread's current context; -1 without a driver or a current context. */
  int currentDevice();

 private:
  using InitFn = int (*)(unsigned int);
  using DeviceGetCountFn = int (*)(int*);
  using DeviceGetFn = int (*)(int*, int);
  using PrimaryCtxRetainFn = int (*)(void**, int);
  using CtxSetCurrentFn = int (*)(void*);
  using CtxGetDeviceFn = int (*)(int*);
  using GetErrorNameFn = int (*)(int, const char**);

  /** Empty when loaded; else why not. */
  std::string load(const std::string& path);
  std::string describe(int result) const;

  std::mutex mutex_;
  bool loaded_ = false;
  InitFn init_ = nullptr;
  DeviceGetCountFn deviceGetCount_ = nullptr;
  DeviceGetFn deviceGet_ = nullptr;
  PrimaryCtxRetainFn primaryCtxRetain_ = nullptr;
  CtxSetCurrentFn ctxSetCurrent_ = nullptr;
  CtxGetDeviceFn ctxGetDevice_ = nullptr;
  GetErrorNameFn getErrorName_ = nullptr;
};

/** Adds cudaProbe, cudaMakeCurrent and cudaCurrentDevice to the addon's exports. */
void registerCudaDriver(Napi::Env env, Napi::Object exports);

}  // namespace tensorlane::symmetric
