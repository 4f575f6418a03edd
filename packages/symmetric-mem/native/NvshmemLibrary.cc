#include "NvshmemLibrary.h"

#include "Arguments.h"
#include "Failure.h"
#include <RuntimeLibrary.h>

#include <dlfcn.h>

#include <cstring>

namespace tlsym {

NvshmemLibrary& NvshmemLibrary::instance() {
  static NvshmemLibrary library;
  return library;
}

void NvshmemLibrary::load(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (handle_ != nullptr) {
    if (path != path_) throw Failure(FailureCode::Usage, "NVSHMEM is already loaded from " + path_ + " in this process");
    return;
  }
  std::string error;
  void* handle = tensorlane::openRuntimeLibrary(path, error);
  if (handle == nullptr) throw Failure(FailureCode::Library, error);
  tensorlane::EntryPoints symbol(handle);
  symbol(initStatus_, "nvshmemx_init_status");
  symbol(getUniqueId_, "nvshmemx_get_uniqueid");
  symbol(setAttrUniqueIdArgs_, "nvshmemx_set_attr_uniqueid_args");
  symbol(hostlibInitAttr_, "nvshmemx_hostlib_init_attr");
  symbol(vendorVersion_, "nvshmemx_vendor_get_version_info");
  symbol(malloc_, "nvshmem_malloc");
  symbol(free_, "nvshmem_free");
  symbol(ptr_, "nvshmem_ptr");
  symbol(myPe_, "nvshmem_my_pe");
  symbol(nPes_, "nvshmem_n_pes");
  if (!symbol.missing().empty()) {
    dlclose(handle);
    throw Failure(FailureCode::Library, path + " lacks " + symbol.missing() + " (not an NVSHMEM 3.x host library)");
  }
  handle_ = handle;
  path_ = path;
}

bool NvshmemLibrary::loaded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return handle_ != nullptr;
}

std::string NvshmemLibrary::path() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return path_;
}

void NvshmemLibrary::requireLoaded() const {
  if (handle_ == nullptr) throw Failure(FailureCode::Library, "NVSHMEM's host library is not loaded");
}

void NvshmemLibrary::requireInitialized(const char* what) const {
  requireLoaded();
  int status = initStatus_();
  if (status < kNvshmemIsInitialized) {
    throw Failure(FailureCode::Usage, std::string(what) + " refused: NVSHMEM is not initialized (nvshmemx_init_status() = " + std::to_string(status) +
                                          "); NVSHMEM would exit the process instead of failing");
  }
}

std::string NvshmemLibrary::version() const {
  std::lock_guard<std::mutex> lock(mutex_);
  requireLoaded();
  int major = 0, minor = 0, patch = 0;
  vendorVersion_(&major, &minor, &patch);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

int NvshmemLibrary::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  requireLoaded();
  return initStatus_();
}

std::string NvshmemLibrary::uniqueId() const {
  std::lock_guard<std::mutex> lock(mutex_);
  requireLoaded();
  NvshmemUniqueId id = nvshmemUniqueId();
  int rc = getUniqueId_(&id);
  if (rc != 0) throw Failure(FailureCode::System, "nvshmemx_get_uniqueid failed (" + std::to_string(rc) + ")");
  return std::string(reinterpret_cast<const char*>(&id), sizeof(id));
}

int NvshmemLibrary::initialize(int rank, int worldSize, const std::string& uniqueId) {
  std::lock_guard<std::mutex> lock(mutex_);
  requireLoaded();
  if (uniqueId.size() != sizeof(NvshmemUniqueId)) {
    throw Failure(FailureCode::Protocol, "an NVSHMEM unique id has " + std::to_string(sizeof(NvshmemUniqueId)) + " bytes, got " + std::to_string(uniqueId.size()));
  }
  if (rank < 0 || worldSize <= 0 || rank >= worldSize) throw Failure(FailureCode::Usage, "rank out of range");
  NvshmemUniqueId id;
  std::memcpy(&id, uniqueId.data(), sizeof(id));
  NvshmemInitAttr attr = nvshmemInitAttr();
  int rc = setAttrUniqueIdArgs_(rank, worldSize, &id, &attr);
  if (rc != 0) return rc;
  return hostlibInitAttr_(kNvshmemInitWithUniqueId, &attr);
}

void* NvshmemLibrary::malloc(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  requireInitialized("nvshmem_malloc");
  void* pointer = malloc_(bytes);
  if (pointer == nullptr && bytes > 0) throw Failure(FailureCode::System, "nvshmem_malloc(" + std::to_string(bytes) + ") returned NULL (symmetric heap exhausted?)");
  return pointer;
}

void NvshmemLibrary::free(void* pointer) {
  std::lock_guard<std::mutex> lock(mutex_);
  requireInitialized("nvshmem_free");
  free_(pointer);
}

void* NvshmemLibrary::peer(const void* pointer, int pe) const {
  std::lock_guard<std::mutex> lock(mutex_);
  requireInitialized("nvshmem_ptr");
  return ptr_(pointer, pe);
}

int NvshmemLibrary::myPe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  requireInitialized("nvshmem_my_pe");
  return myPe_();
}

int NvshmemLibrary::nPes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  requireInitialized("nvshmem_n_pes");
  return nPes_();
}

namespace {

uint64_t pointerArg(const Napi::CallbackInfo& info, size_t i) {
  bool lossless = false;
  if (!info[i].IsBigInt()) throw Failure(FailureCode::Usage, "a device pointer must be a bigint");
  uint64_t value = info[i].As<Napi::BigInt>().Uint64Value(&lossless);
  if (!lossless) throw Failure(FailureCode::Usage, "a device pointer must fit 64 bits");
  return value;
}

int intArg(const Napi::CallbackInfo& info, size_t i, const char* what) {
  if (!info[i].IsNumber()) throw Failure(FailureCode::Usage, std::string(what) + " must be a number");
  return info[i].As<Napi::Number>().Int32Value();
}

}  // namespace

void registerNvshmem(Napi::Env env, Napi::Object exports) {
  NvshmemLibrary& lib = NvshmemLibrary::instance();
  exports.Set("nvshmemLoad", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      if (!info[0].IsString()) throw Failure(FailureCode::Usage, "path must be a string");
      lib.load(info[0].As<Napi::String>().Utf8Value());
      return info.Env().Undefined();
    });
  }));
  exports.Set("nvshmemLoaded", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return lib.loaded() ? Napi::Value(Napi::String::New(info.Env(), lib.path())) : info.Env().Undefined();
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
      if (!info[2].IsTypedArray()) throw Failure(FailureCode::Usage, "the unique id must be a Uint8Array");
      Napi::Uint8Array id = info[2].As<Napi::Uint8Array>();
      std::string bytes(reinterpret_cast<const char*>(id.Data()), id.ByteLength());
      return Napi::Number::New(info.Env(), lib.initialize(intArg(info, 0, "rank"), intArg(info, 1, "worldSize"), bytes));
    });
  }));
  exports.Set("nvshmemMalloc", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      void* pointer = lib.malloc(static_cast<size_t>(uintArg(info, 0, "bytes")));
      return Napi::BigInt::New(info.Env(), static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pointer)));
    });
  }));
  exports.Set("nvshmemFree", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      lib.free(reinterpret_cast<void*>(static_cast<uintptr_t>(pointerArg(info, 0))));
      return info.Env().Undefined();
    });
  }));
  exports.Set("nvshmemPeer", Napi::Function::New(env, [&lib](const Napi::CallbackInfo& info) {
    return guarded(info.Env(), [&]() -> Napi::Value {
      void* peer = lib.peer(reinterpret_cast<void*>(static_cast<uintptr_t>(pointerArg(info, 0))), intArg(info, 1, "pe"));
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

}  // namespace tlsym
