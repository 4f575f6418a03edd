#include "CudaDriver.h"

#include <tensorlane/Arguments.h>
#include <tensorlane/DynamicLibrary.h>

namespace tensorlane::symmetric {

CudaDriver& CudaDriver::instance() {
  static CudaDriver driver;
  return driver;
}

std::string CudaDriver::load(const std::string& path) {
  if (loaded_) return "";
  try {
    DynamicLibrary lib(path);
    lib.require(init_, "cuInit");
    lib.require(deviceGetCount_, "cuDeviceGetCount");
    lib.require(deviceGet_, "cuDeviceGet");
    lib.require(primaryCtxRetain_, "cuDevicePrimaryCtxRetain");
    lib.require(ctxSetCurrent_, "cuCtxSetCurrent");
    lib.require(ctxGetDevice_, "cuCtxGetDevice");
    lib.require(getErrorName_, "cuGetErrorName");
    lib.check("a CUDA driver library");
  } catch (const Failure& failure) {
    return failure.what();
  }
  loaded_ = true;
  return "";
}

std::string CudaDriver::describe(int result) const {
  const char* name = nullptr;
  if (getErrorName_(result, &name) == 0 && name != nullptr) return std::string(name) + " (" + std::to_string(result) + ")";
  return "CUresult " + std::to_string(result);
}

DeviceProbe CudaDriver::probe(const std::string& path, int ordinal) {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceProbe probe;
  probe.reason = load(path);
  if (!probe.reason.empty()) return probe;
  int result = init_(0);
  if (result != 0) {
    probe.reason = "cuInit failed: " + describe(result);
    return probe;
  }
  int count = 0;
  result = deviceGetCount_(&count);
  if (result != 0) {
    probe.reason = "cuDeviceGetCount failed: " + describe(result);
    return probe;
  }
  probe.deviceCount = count;
  if (ordinal < 0 || ordinal >= count) {
    probe.reason = "the driver sees " + std::to_string(count) + " device(s), so there is no cuda:" + std::to_string(ordinal);
    return probe;
  }
  probe.usable = true;
  return probe;
}

std::string CudaDriver::makeCurrent(int ordinal) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!loaded_) return "the CUDA driver is not loaded";
  int device = 0;
  void* context = nullptr;
  int result = deviceGet_(&device, ordinal);
  if (result != 0) return "cuDeviceGet failed: " + describe(result);
  // Retained for the life of the process, as the CUDA runtime retains the primary context it uses.
  if ((result = primaryCtxRetain_(&context, device)) != 0) return "cuDevicePrimaryCtxRetain failed: " + describe(result);
  if ((result = ctxSetCurrent_(context)) != 0) return "cuCtxSetCurrent failed: " + describe(result);
  return "";
}

int CudaDriver::currentDevice() {
  std::lock_guard<std::mutex> lock(mutex_);
  int device = -1;
  if (!loaded_ || ctxGetDevice_(&device) != 0) return -1;
  return device;
}

namespace {

int ordinalArg(const Napi::CallbackInfo& info, size_t i) { return static_cast<int>(integerArg(info[i], "ordinal", 0, INT32_MAX)); }

}  // namespace

void registerCudaDriver(Napi::Env env, Napi::Object exports) {
  exports.Set("cudaProbe", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      DeviceProbe probe = CudaDriver::instance().probe(stringArg(info[0], "path"), ordinalArg(info, 1));
      Napi::Object out = Napi::Object::New(info.Env());
      out.Set("usable", probe.usable);
      out.Set("deviceCount", probe.deviceCount);
      if (!probe.usable) out.Set("reason", probe.reason);
      return out;
    });
  }));
  exports.Set("cudaMakeCurrent", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      std::string why = CudaDriver::instance().makeCurrent(ordinalArg(info, 0));
      return why.empty() ? info.Env().Undefined() : Napi::Value(Napi::String::New(info.Env(), why));
    });
  }));
  exports.Set("cudaCurrentDevice", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), CudaDriver::instance().currentDevice());
  }));
}

}  // namespace tensorlane::symmetric
