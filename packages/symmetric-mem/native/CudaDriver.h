// The CUDA driver API (libcuda.so.1), dlopened on demand for one thing: making a device's primary
// context current on the calling thread before NVSHMEM initializes, which is what cudaSetDevice does.
// NVSHMEM takes its device from the current context and, with none, picks one itself (the local PE
// index modulo the device count), which need not be the device the caller asked for.
#pragma once

#include <napi.h>

#include <mutex>
#include <string>

namespace tlsym {

struct DeviceSelection {
  bool selected = false;
  /** The devices the driver sees; -1 when the driver did not load or initialize. */
  int deviceCount = -1;
  /** Why the device was not made current, when it was not. */
  std::string reason;
};

class CudaDriver {
 public:
  static CudaDriver& instance();

  /** Loads `path` (the first path that loads stays for the process) and makes `ordinal`'s primary context current here. */
  DeviceSelection makeCurrent(const std::string& path, int ordinal);

 private:
  using InitFn = int (*)(unsigned int);
  using DeviceGetCountFn = int (*)(int*);
  using DeviceGetFn = int (*)(int*, int);
  using PrimaryCtxRetainFn = int (*)(void**, int);
  using CtxSetCurrentFn = int (*)(void*);
  using GetErrorNameFn = int (*)(int, const char**);

  /** Empty when loaded; else why not. */
  std::string load(const std::string& path);
  std::string describe(int result) const;

  std::mutex mutex_;
  void* handle_ = nullptr;
  InitFn init_ = nullptr;
  DeviceGetCountFn deviceGetCount_ = nullptr;
  DeviceGetFn deviceGet_ = nullptr;
  PrimaryCtxRetainFn primaryCtxRetain_ = nullptr;
  CtxSetCurrentFn ctxSetCurrent_ = nullptr;
  GetErrorNameFn getErrorName_ = nullptr;
};

/** Adds cudaMakeCurrent to the addon's exports. */
void registerCudaDriver(Napi::Env env, Napi::Object exports);

}  // namespace tlsym
