#include "CudaDriver.h"

#include "Failure.h"

#include <dlfcn.h>

namespace tlsym {

CudaDriver& CudaDriver::instance() {
  static CudaDriver driver;
  return driver;
}

std::string CudaDriver::load(const std::string& path) {
  if (handle_ != nullptr) return "";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return error != nullptr ? error : "dlopen(" + path + ") failed";
  }
  std::string missing;
  auto symbol = [&](const char* name) {
    void* found = dlsym(handle, name);
    if (found == nullptr && missing.empty()) missing = path + " lacks " + name + " (not a CUDA driver library)";
    return found;
  };
  init_ = reinterpret_cast<InitFn>(symbol("cuInit"));
  deviceGetCount_ = reinterpret_cast<DeviceGetCountFn>(symbol("cuDeviceGetCount"));
  deviceGet_ = reinterpret_cast<DeviceGetFn>(symbol("cuDeviceGet"));
  primaryCtxRetain_ = reinterpret_cast<PrimaryCtxRetainFn>(symbol("cuDevicePrimaryCtxRetain"));
  ctxSetCurrent_ = reinterpret_cast<CtxSetCurrentFn>(symbol("cuCtxSetCurrent"));
  getErrorName_ = reinterpret_cast<GetErrorNameFn>(symbol("cuGetErrorName"));
  if (!missing.empty()) {
    dlclose(handle);
    return missing;
  }
  handle_ = handle;
  return "";
}

std::string CudaDriver::describe(int result) const {
  const char* name = nullptr;
  if (getErrorName_(result, &name) == 0 && name != nullptr) return std::string(name) + " (" + std::to_string(result) + ")";
  return "CUresult " + std::to_string(result);
}

DeviceSelection CudaDriver::makeCurrent(const std::string& path, int ordinal) {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceSelection selection;
  selection.reason = load(path);
  if (!selection.reason.empty()) return selection;
  int result = init_(0);
  if (result != 0) {
    selection.reason = "cuInit failed: " + describe(result);
    return selection;
  }
  result = deviceGetCount_(&selection.deviceCount);
  if (result != 0) {
    selection.deviceCount = -1;
    selection.reason = "cuDeviceGetCount failed: " + describe(result);
    return selection;
  }
  if (ordinal < 0 || ordinal >= selection.deviceCount) {
    selection.reason = "the driver sees " + std::to_string(selection.deviceCount) + " device(s), so there is no cuda:" + std::to_string(ordinal);
    return selection;
  }
  int device = 0;
  void* context = nullptr;
  if ((result = deviceGet_(&device, ordinal)) != 0) {
    selection.reason = "cuDeviceGet failed: " + describe(result);
  } else if ((result = primaryCtxRetain_(&context, device)) != 0) {
    selection.reason = "cuDevicePrimaryCtxRetain failed: " + describe(result);
  } else if ((result = ctxSetCurrent_(context)) != 0) {
    selection.reason = "cuCtxSetCurrent failed: " + describe(result);
  } else {
    selection.selected = true;
  }
  return selection;
}

void registerCudaDriver(Napi::Env env, Napi::Object exports) {
  exports.Set("cudaMakeCurrent", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      if (!info[0].IsString()) throw Failure(FailureCode::Usage, "path must be a string");
      if (!info[1].IsNumber()) throw Failure(FailureCode::Usage, "ordinal must be a number");
      DeviceSelection selection = CudaDriver::instance().makeCurrent(info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::Number>().Int32Value());
      Napi::Object out = Napi::Object::New(info.Env());
      out.Set("selected", selection.selected);
      out.Set("deviceCount", selection.deviceCount);
      if (!selection.selected) out.Set("reason", selection.reason);
      return out;
    });
  }));
}

}  // namespace tlsym
