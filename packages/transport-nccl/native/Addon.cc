// Entry point of the tensorlane NCCL addon: library loading, CUDA memory and copies, and thin
// bindings over the process-wide communicators (see Communicator.h). Blocking NCCL work runs on the
// communicators' threads; CUDA allocations and copies are synchronous calls on the calling thread.
#include "Communicator.h"
#include "CudaRuntime.h"
#include "NcclLibrary.h"

#include <tensorlane/Arguments.h>
#include <tensorlane/Settler.h>
#include <tensorlane/Teardown.h>

#include <napi.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace tensorlane::nccl {

namespace {

std::vector<DeviceBuffer> toBuffers(const Napi::Value& value) {
  if (!value.IsArray()) throw Failure(FailureCode::Usage, "buffers must be an array");
  Napi::Array array = value.As<Napi::Array>();
  std::vector<DeviceBuffer> out;
  for (uint32_t i = 0; i < array.Length(); i++) {
    const std::string where = "buffer " + std::to_string(i);
    if (!array.Get(i).IsObject()) throw Failure(FailureCode::Usage, where + " must be an object");
    Napi::Object b = array.Get(i).As<Napi::Object>();
    DeviceBuffer buffer;
    buffer.address = addressArg(b.Get("address"), where + ".address");
    buffer.count = static_cast<size_t>(sizeArg(b.Get("count"), where + ".count"));
    buffer.dtype = static_cast<ncclDataType_t>(integerArg(b.Get("dtype"), where + ".dtype", ncclInt8, ncclFloat8e5m2));
    if (buffer.count > 0 && buffer.address == 0) throw Failure(FailureCode::Usage, where + " has a null address");
    out.push_back(buffer);
  }
  return out;
}

/** { promise, abort } for JS: abort ends the communicator's running wait with ncclCommAbort. */
Napi::Object operation(Napi::Env env, const std::shared_ptr<Communicator>& comm, const std::shared_ptr<Settler>& settler) {
  Napi::Object handle = Napi::Object::New(env);
  handle.Set("promise", settler->promise());
  handle.Set("abort", Napi::Function::New(env, [comm](const Napi::CallbackInfo&) { comm->requestAbort("aborted by the runtime"); }));
  return handle;
}

/**
 * Posts `body` to the communicator's thread; its result (undefined, or a BigInt) or failure settles
 * the returned settler. NCCL writes device memory only, so the teardown of the environment does
 * not wait for the body.
 */
template <typename F>
std::shared_ptr<Settler> postTo(Napi::Env env, const std::shared_ptr<Communicator>& comm, F body) {
  auto settler = Settler::create(env);
  comm->post([settler, body]() mutable {
    try {
      const std::optional<uint64_t> value = body();
      settler->resolve([value](Napi::Env env) { return value.has_value() ? Napi::Value(Napi::BigInt::New(env, *value)) : env.Undefined(); });
    } catch (const Failure& f) {
      settler->reject(f);
    } catch (const std::exception& e) {
      settler->reject(Failure(FailureCode::Nccl, e.what()));
    }
  });
  return settler;
}

Napi::Value LoadNccl(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    NcclLibrary& nccl = NcclLibrary::load(stringArg(info[0], "path"));
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("path", NcclLibrary::loadedPath());
    out.Set("version", nccl.version);
    return out;
  });
}

Napi::Value LoadCudart(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    CudaRuntime::load(stringArg(info[0], "path"));
    return Napi::String::New(info.Env(), CudaRuntime::loadedPath());
  });
}

Napi::Value Loaded(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object out = Napi::Object::New(env);
  const std::string nccl = NcclLibrary::loadedPath();
  const std::string cudart = CudaRuntime::loadedPath();
  out.Set("nccl", nccl.empty() ? env.Undefined() : Napi::String::New(env, nccl));
  out.Set("cudart", cudart.empty() ? env.Undefined() : Napi::String::New(env, cudart));
  out.Set("ncclVersion", nccl.empty() ? env.Undefined() : Napi::Number::New(env, NcclLibrary::get().version));
  return out;
}

Napi::Value UniqueId(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    NcclLibrary& nccl = NcclLibrary::get();
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    ncclResult_t result = nccl.getUniqueId(&id);
    if (result != ncclSuccess) throw Failure(FailureCode::Nccl, "ncclGetUniqueId failed: " + nccl.describe(result));
    Napi::Uint8Array out = Napi::Uint8Array::New(info.Env(), sizeof(id));
    std::memcpy(out.Data(), &id, sizeof(id));
    return out;
  });
}

Napi::Value ProbeDevices(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    const DeviceProbe p = CudaRuntime::get().probe();
    Napi::Env env = info.Env();
    Napi::Object out = Napi::Object::New(env);
    out.Set("count", p.count);
    out.Set("driverVersion", p.driverVersion);
    out.Set("runtimeVersion", p.runtimeVersion);
    out.Set("error", p.errorText.empty() ? env.Undefined() : Napi::String::New(env, p.errorText));
    return out;
  });
}

int deviceArg(const Napi::Value& value) { return static_cast<int>(integerArg(value, "device", 0, 1 << 20)); }

Napi::Value DeviceAlloc(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    const int device = deviceArg(info[0]);
    const size_t bytes = static_cast<size_t>(sizeArg(info[1], "byteLength"));
    const bool viaNccl = info[2].ToBoolean().Value();
    CudaRuntime& cuda = CudaRuntime::get();
    cuda.useDevice(device);
    void* ptr = nullptr;
    if (viaNccl) {
      NcclLibrary& nccl = NcclLibrary::get();
      if (nccl.memAlloc == nullptr) throw Failure(FailureCode::Version, "ncclMemAlloc needs NCCL >= 2.19");
      ncclResult_t result = nccl.memAlloc(&ptr, bytes);
      if (result != ncclSuccess) throw Failure(FailureCode::Nccl, "ncclMemAlloc(" + std::to_string(bytes) + ") failed: " + nccl.describe(result));
    } else {
      cuda.check(cuda.malloc(&ptr, bytes), "cudaMalloc(" + std::to_string(bytes) + ") on cuda:" + std::to_string(device));
    }
    return Napi::BigInt::New(info.Env(), static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr)));
  });
}

Napi::Value DeviceFree(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    const int device = deviceArg(info[0]);
    void* ptr = reinterpret_cast<void*>(addressArg(info[1], "address"));
    const bool viaNccl = info[2].ToBoolean().Value();
    CudaRuntime& cuda = CudaRuntime::get();
    cuda.useDevice(device);
    if (viaNccl) {
      NcclLibrary& nccl = NcclLibrary::get();
      ncclResult_t result = nccl.memFree(ptr);
      if (result != ncclSuccess) throw Failure(FailureCode::Nccl, "ncclMemFree failed: " + nccl.describe(result));
    } else {
      cuda.check(cuda.free(ptr), "cudaFree");
    }
    return info.Env().Undefined();
  });
}

Napi::Value CopyToDevice(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    const int device = deviceArg(info[0]);
    void* dst = reinterpret_cast<void*>(addressArg(info[1], "destination"));
    Napi::Uint8Array src = bytesArg(info[2], "source");
    CudaRuntime& cuda = CudaRuntime::get();
    cuda.useDevice(device);
    cuda.check(cuda.memcpy(dst, src.Data(), src.ByteLength(), cudaMemcpyHostToDevice), "cudaMemcpy host to device");
    return info.Env().Undefined();
  });
}

Napi::Value CopyToHost(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    const int device = deviceArg(info[0]);
    Napi::Uint8Array dst = bytesArg(info[1], "destination");
    const void* src = reinterpret_cast<const void*>(addressArg(info[2], "source"));
    CudaRuntime& cuda = CudaRuntime::get();
    cuda.useDevice(device);
    cuda.check(cuda.memcpy(dst.Data(), src, dst.ByteLength(), cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
    return info.Env().Undefined();
  });
}

Napi::Value CopyOnDevice(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    const int device = deviceArg(info[0]);
    void* dst = reinterpret_cast<void*>(addressArg(info[1], "destination"));
    const void* src = reinterpret_cast<const void*>(addressArg(info[2], "source"));
    const size_t bytes = static_cast<size_t>(sizeArg(info[3], "byteLength"));
    CudaRuntime& cuda = CudaRuntime::get();
    cuda.useDevice(device);
    cuda.check(cuda.memcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy device to device");
    return info.Env().Undefined();
  });
}

Napi::Value CreateCommunicator(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    const std::string name = stringArg(info[0], "group");
    const int rank = static_cast<int>(integerArg(info[1], "rank", 0, 1 << 24));
    const int size = static_cast<int>(integerArg(info[2], "size", 1, 1 << 24));
    if (rank >= size) throw Failure(FailureCode::Usage, "rank must be below size");
    const int device = deviceArg(info[3]);
    Napi::Uint8Array bytes = bytesArg(info[4], "unique id");
    if (bytes.ByteLength() != sizeof(ncclUniqueId)) {
      throw Failure(FailureCode::Usage, "an ncclUniqueId has " + std::to_string(sizeof(ncclUniqueId)) + " bytes, got " + std::to_string(bytes.ByteLength()));
    }
    ncclUniqueId id;
    std::memcpy(&id, bytes.Data(), sizeof(id));
    const auto timeout = timeoutArg(info[5]);
    auto comm = Communicator::create(name, rank, size, device);
    auto settler = postTo(info.Env(), comm, [comm, id, timeout]() -> std::optional<uint64_t> {
      comm->init(id, timeout);
      return std::nullopt;
    });
    return operation(info.Env(), comm, settler);
  });
}

Napi::Value DestroyCommunicator(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    auto comm = Communicator::find(stringArg(info[0], "group"));
    const auto timeout = timeoutArg(info[1]);
    return postTo(info.Env(), comm, [comm, timeout]() -> std::optional<uint64_t> {
             comm->destroy(timeout);
             return std::nullopt;
           })
        ->promise();
  });
}

Napi::Value AbortCommunicator(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    auto comm = Communicator::find(stringArg(info[0], "group"));
    const std::string reason = stringArg(info[1], "reason");
    return postTo(info.Env(), comm, [comm, reason]() -> std::optional<uint64_t> {
             comm->abort(reason);
             return std::nullopt;
           })
        ->promise();
  });
}

Napi::Value Communicators(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto all = Communicator::list();
  Napi::Array out = Napi::Array::New(env, all.size());
  for (size_t i = 0; i < all.size(); i++) {
    const auto& c = all[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("id", static_cast<double>(c.id));
    o.Set("group", c.name);
    o.Set("rank", c.rank);
    o.Set("size", c.size);
    o.Set("device", c.device);
    o.Set("ready", c.ready);
    o.Set("broken", c.broken.empty() ? env.Undefined() : Napi::String::New(env, c.broken));
    o.Set("registrations", static_cast<double>(c.registrations));
    o.Set("windows", static_cast<double>(c.windows));
    out.Set(static_cast<uint32_t>(i), o);
  }
  return out;
}

Napi::Value Transfer(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    auto comm = Communicator::find(stringArg(info[0], "group"));
    const int peer = static_cast<int>(integerArg(info[1], "peer", 0, 1 << 24));
    const bool send = info[2].ToBoolean().Value();
    auto buffers = toBuffers(info[3]);
    const auto timeout = timeoutArg(info[4]);
    auto settler = postTo(info.Env(), comm, [comm, peer, send, buffers, timeout]() -> std::optional<uint64_t> {
      comm->transfer(peer, send, buffers, timeout);
      return std::nullopt;
    });
    return operation(info.Env(), comm, settler);
  });
}

Napi::Value AllReduce(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    auto comm = Communicator::find(stringArg(info[0], "group"));
    auto buffers = toBuffers(info[1]);
    const auto op = static_cast<ncclRedOp_t>(integerArg(info[2], "op", ncclSum, ncclAvg));
    const auto timeout = timeoutArg(info[3]);
    auto settler = postTo(info.Env(), comm, [comm, buffers, op, timeout]() -> std::optional<uint64_t> {
      comm->allReduce(buffers, op, timeout);
      return std::nullopt;
    });
    return operation(info.Env(), comm, settler);
  });
}

Napi::Value Broadcast(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    auto comm = Communicator::find(stringArg(info[0], "group"));
    auto buffers = toBuffers(info[1]);
    const int root = static_cast<int>(integerArg(info[2], "root", 0, 1 << 24));
    const auto timeout = timeoutArg(info[3]);
    auto settler = postTo(info.Env(), comm, [comm, buffers, root, timeout]() -> std::optional<uint64_t> {
      comm->broadcast(buffers, root, timeout);
      return std::nullopt;
    });
    return operation(info.Env(), comm, settler);
  });
}

Napi::Value Register(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    auto comm = Communicator::find(stringArg(info[0], "group"));
    const uintptr_t address = addressArg(info[1], "address");
    const size_t bytes = static_cast<size_t>(integerArg(info[2], "byteLength", 1, kMaxSafeInteger));
    const auto timeout = timeoutArg(info[3]);
    return postTo(info.Env(), comm, [comm, address, bytes, timeout]() -> std::optional<uint64_t> {
             return comm->registerBuffer(address, bytes, timeout);
           })
        ->promise();
  });
}

Napi::Value Deregister(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    auto comm = Communicator::find(stringArg(info[0], "group"));
    const uintptr_t handle = addressArg(info[1], "handle");
    const auto timeout = timeoutArg(info[2]);
    return postTo(info.Env(), comm, [comm, handle, timeout]() -> std::optional<uint64_t> {
             comm->deregisterBuffer(handle, timeout);
             return std::nullopt;
           })
        ->promise();
  });
}

Napi::Value RegisterWindow(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    auto comm = Communicator::find(stringArg(info[0], "group"));
    const uintptr_t address = addressArg(info[1], "address");
    const size_t bytes = static_cast<size_t>(integerArg(info[2], "byteLength", 1, kMaxSafeInteger));
    const int flags = info[3].ToBoolean().Value() ? TL_NCCL_WIN_COLL_SYMMETRIC : TL_NCCL_WIN_DEFAULT;
    const auto timeout = timeoutArg(info[4]);
    return postTo(info.Env(), comm, [comm, address, bytes, flags, timeout]() -> std::optional<uint64_t> {
             return comm->registerWindow(address, bytes, flags, timeout);
           })
        ->promise();
  });
}

Napi::Value DeregisterWindow(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    auto comm = Communicator::find(stringArg(info[0], "group"));
    const uintptr_t handle = addressArg(info[1], "window");
    const auto timeout = timeoutArg(info[2]);
    return postTo(info.Env(), comm, [comm, handle, timeout]() -> std::optional<uint64_t> {
             comm->deregisterWindow(handle, timeout);
             return std::nullopt;
           })
        ->promise();
  });
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  tensorlane::holdThroughTeardown(env);
  exports.Set("loadNccl", Napi::Function::New(env, LoadNccl));
  exports.Set("loadCudart", Napi::Function::New(env, LoadCudart));
  exports.Set("loaded", Napi::Function::New(env, Loaded));
  exports.Set("uniqueId", Napi::Function::New(env, UniqueId));
  exports.Set("probeDevices", Napi::Function::New(env, ProbeDevices));
  exports.Set("deviceAlloc", Napi::Function::New(env, DeviceAlloc));
  exports.Set("deviceFree", Napi::Function::New(env, DeviceFree));
  exports.Set("copyToDevice", Napi::Function::New(env, CopyToDevice));
  exports.Set("copyToHost", Napi::Function::New(env, CopyToHost));
  exports.Set("copyOnDevice", Napi::Function::New(env, CopyOnDevice));
  exports.Set("createCommunicator", Napi::Function::New(env, CreateCommunicator));
  exports.Set("destroyCommunicator", Napi::Function::New(env, DestroyCommunicator));
  exports.Set("abortCommunicator", Napi::Function::New(env, AbortCommunicator));
  exports.Set("communicators", Napi::Function::New(env, Communicators));
  exports.Set("transfer", Napi::Function::New(env, Transfer));
  exports.Set("allReduce", Napi::Function::New(env, AllReduce));
  exports.Set("broadcast", Napi::Function::New(env, Broadcast));
  exports.Set("register", Napi::Function::New(env, Register));
  exports.Set("deregister", Napi::Function::New(env, Deregister));
  exports.Set("registerWindow", Napi::Function::New(env, RegisterWindow));
  exports.Set("deregisterWindow", Napi::Function::New(env, DeregisterWindow));
  return exports;
}

}  // namespace

}  // namespace tensorlane::nccl

static Napi::Object InitAddon(Napi::Env env, Napi::Object exports) { return tensorlane::nccl::Init(env, exports); }

NODE_API_MODULE(tensorlane_nccl, InitAddon)
