#include "NvshmemLibrary.h"

#include <tensorlane/Arguments.h>

#include <climits>
#include <cstring>
#include <memory>

namespace tensorlane::symmetric {

NvshmemLibrary& NvshmemLibrary::instance() {
  static NvshmemLibrary library;
  return library;
}

NvshmemLibrary::Api* NvshmemLibrary::Api::open(const std::string& path) {
  DynamicLibrary lib(path);
  auto api = std::make_unique<Api>();
  lib.require(api->initStatus, "nvshmemx_init_status");
  lib.require(api->getUniqueId, "nvshmemx_get_uniqueid");
  lib.require(api->setAttrUniqueIdArgs, "nvshmemx_set_attr_uniqueid_args");
  lib.require(api->hostlibInitAttr, "nvshmemx_hostlib_init_attr");
  lib.require(api->vendorVersion, "nvshmemx_vendor_get_version_info");
  lib.require(api->malloc, "nvshmem_malloc");
  lib.require(api->free, "nvshmem_free");
  lib.require(api->ptr, "nvshmem_ptr");
  lib.require(api->myPe, "nvshmem_my_pe");
  lib.require(api->nPes, "nvshmem_n_pes");
  lib.check("an NVSHMEM 3.x host library");
  return api.release();
}

void NvshmemLibrary::load(const std::string& path) { Api::load(path); }

std::string NvshmemLibrary::path() const { return Api::loadedPath(); }

const NvshmemLibrary::Api& NvshmemLibrary::initialized(const char* what) const {
  const Api& api = Api::get();
  int status = api.initStatus();
  if (status < kNvshmemIsInitialized) {
    throw Failure(FailureCode::Usage, std::string(what) + " refused: NVSHMEM is not initialized (nvshmemx_init_status() = " + std::to_string(status) +
                                          "); NVSHMEM would exit the process instead of failing");
  }
  return api;
}

std::string NvshmemLibrary::version() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int major = 0, minor = 0, patch = 0;
  Api::get().vendorVersion(&major, &minor, &patch);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

int NvshmemLibrary::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return Api::get().initStatus();
}

std::string NvshmemLibrary::uniqueId() const {
  std::lock_guard<std::mutex> lock(mutex_);
  NvshmemUniqueId id = nvshmemUniqueId();
  int rc = Api::get().getUniqueId(&id);
  if (rc != 0) throw Failure(FailureCode::System, "nvshmemx_get_uniqueid failed (" + std::to_string(rc) + ")");
  return std::string(reinterpret_cast<const char*>(&id), sizeof(id));
}

int NvshmemLibrary::initialize(int rank, int worldSize, const std::string& uniqueId) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Api& api = Api::get();
  if (uniqueId.size() != sizeof(NvshmemUniqueId)) {
    throw Failure(FailureCode::Protocol, "an NVSHMEM unique id has " + std::to_string(sizeof(NvshmemUniqueId)) + " bytes, got " + std::to_string(uniqueId.size()));
  }
  if (rank < 0 || worldSize <= 0 || rank >= worldSize) throw Failure(FailureCode::Usage, "rank out of range");
  NvshmemUniqueId id;
  std::memcpy(&id, uniqueId.data(), sizeof(id));
  NvshmemInitAttr attr = nvshmemInitAttr();
  int rc = api.setAttrUniqueIdArgs(rank, worldSize, &id, &attr);
  if (rc != 0) return rc;
  return api.hostlibInitAttr(kNvshmemInitWithUniqueId, &attr);
}

void* NvshmemLibrary::malloc(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  void* pointer = initialized("nvshmem_malloc").malloc(bytes);
  if (pointer == nullptr && bytes > 0) throw Failure(FailureCode::System, "nvshmem_malloc(" + std::to_string(bytes) + ") returned NULL (symmetric heap exhausted?)");
  return pointer;
}

void NvshmemLibrary::free(void* pointer) {
  std::lock_guard<std::mutex> lock(mutex_);
  initialized("nvshmem_free").free(pointer);
}

void* NvshmemLibrary::peer(const void* pointer, int pe) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return initialized("nvshmem_ptr").ptr(pointer, pe);
}

int NvshmemLibrary::myPe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return initialized("nvshmem_my_pe").myPe();
}

int NvshmemLibrary::nPes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return initialized("nvshmem_n_pes").nPes();
}

namespace {

int intArg(const Napi::CallbackInfo& info, size_t i, const char* what) { return static_cast<int>(integerArg(info[i], what, 0, INT32_MAX)); }

void* pointerArg(const Napi::CallbackInfo& info, size_t i) { return reinterpret_cast<void*>(addressArg(info[i], "a device pointer")); }

}  // namespace

void registerNvshmem(Napi::Env env, Napi::Object exports) {
  NvshmemLibrary& lib = NvshmemLibrary::instance();
  exports.Set("nvshmemLoad", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      lib.load(stringArg(info[0], "path"));
      return info.Env().Undefined();
    });
  }));
  exports.Set("nvshmemLoaded", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    const std::string path = lib.path();
    return path.empty() ? info.Env().Undefined() : Napi::Value(Napi::String::New(info.Env(), path));
  }));
  exports.Set("nvshmemVersion", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value { return Napi::String::New(info.Env(), lib.version()); });
  }));
  exports.Set("nvshmemStatus", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value { return Napi::Number::New(info.Env(), lib.status()); });
  }));
  exports.Set("nvshmemUniqueId", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      std::string id = lib.uniqueId();
      return Napi::Buffer<char>::Copy(info.Env(), id.data(), id.size());
    });
  }));
  exports.Set("nvshmemInitialize", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      Napi::Uint8Array id = bytesArg(info[2], "the unique id");
      std::string bytes(reinterpret_cast<const char*>(id.Data()), id.ByteLength());
      return Napi::Number::New(info.Env(), lib.initialize(intArg(info, 0, "rank"), intArg(info, 1, "worldSize"), bytes));
    });
  }));
  exports.Set("nvshmemMalloc", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      void* pointer = lib.malloc(static_cast<size_t>(sizeArg(info[0], "bytes", FailureCode::Protocol)));
      return Napi::BigInt::New(info.Env(), static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pointer)));
    });
  }));
  exports.Set("nvshmemFree", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      lib.free(pointerArg(info, 0));
      return info.Env().Undefined();
    });
  }));
  exports.Set("nvshmemPeer", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      void* peer = lib.peer(pointerArg(info, 0), intArg(info, 1, "pe"));
      return Napi::BigInt::New(info.Env(), static_cast<uint64_t>(reinterpret_cast<uintptr_t>(peer)));
    });
  }));
  exports.Set("nvshmemPes", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      Napi::Object out = Napi::Object::New(info.Env());
      out.Set("myPe", lib.myPe());
      out.Set("nPes", lib.nPes());
      return out;
    });
  }));
}

}  // namespace tensorlane::symmetric
