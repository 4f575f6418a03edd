// Entry point of the tensorlane NIXL addon. Every function is a thin binding over the
// process-wide ProcessAgent (see ProcessAgent.h for why one agent serves every thread).
#include "NixlLibrary.h"
#include "ProcessAgent.h"
#include "ReadJob.h"
#include "ReadPlan.h"

#include <tensorlane/Arguments.h>
#include <tensorlane/Teardown.h>

#include <napi.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tensorlane::nixl {

namespace {

Napi::Value field(const Napi::Object& object, const char* name, const std::string& where) {
  if (!object.Has(name)) throw Failure(FailureCode::Protocol, where + " lacks \"" + name + "\"");
  return object.Get(name);
}

// Sizes, offsets and addresses, most of them from a peer's metadata.
uint64_t toUint(const Napi::Value& value, const std::string& what) { return sizeArg(value, what, FailureCode::Protocol); }

nixl_capi_mem_type_t toMem(const Napi::Value& value, const std::string& what) {
  std::string mem = value.IsString() ? value.As<Napi::String>().Utf8Value() : "";
  if (mem == "dram") return NIXL_CAPI_MEM_DRAM;
  if (mem == "vram") return NIXL_CAPI_MEM_VRAM;
  throw Failure(FailureCode::Protocol, what + " is neither \"dram\" nor \"vram\"");
}

Napi::Array toArray(const Napi::Value& value, const std::string& what) {
  if (!value.IsArray()) throw Failure(FailureCode::Protocol, what + " is not an array");
  return value.As<Napi::Array>();
}

/** A local memory range: host bytes (a typed array over shared memory) or a device address. */
struct Memory {
  uintptr_t address = 0;
  size_t length = 0;
  nixl_capi_mem_type_t mem = NIXL_CAPI_MEM_DRAM;
  uint64_t device = 0;
};

Memory toMemory(const Napi::Value& value) {
  if (!value.IsObject()) throw Failure(FailureCode::Usage, "a memory range must be an object");
  Napi::Object spec = value.As<Napi::Object>();
  Memory memory;
  memory.mem = toMem(spec.Get("mem"), "memory kind");
  memory.device = toUint(spec.Get("device"), "device index");
  if (memory.mem == NIXL_CAPI_MEM_DRAM) {
    Napi::Uint8Array array = bytesArg(spec.Get("bytes"), "host memory");
    memory.address = reinterpret_cast<uintptr_t>(array.Data());
    memory.length = array.ByteLength();
  } else {
    memory.address = static_cast<uintptr_t>(toUint(spec.Get("address"), "device address"));
    memory.length = static_cast<size_t>(toUint(spec.Get("length"), "device length"));
  }
  return memory;
}

Napi::Object keyObject(Napi::Env env, const RegionTable::Key& key) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("address", Napi::BigInt::New(env, static_cast<uint64_t>(key.first)));
  out.Set("length", Napi::Number::New(env, static_cast<double>(key.second)));
  return out;
}

RegionTable::Key toKey(const Napi::Value& value) {
  if (!value.IsObject()) throw Failure(FailureCode::Usage, "a registration key must be an object");
  Napi::Object key = value.As<Napi::Object>();
  return RegionTable::Key(static_cast<uintptr_t>(toUint(key.Get("address"), "key address")),
                          static_cast<size_t>(toUint(key.Get("length"), "key length")));
}

Napi::Value Load(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    Napi::Object options = info[0].As<Napi::Object>();
    std::map<std::string, std::string> env;
    Napi::Object vars = options.Get("env").As<Napi::Object>();
    Napi::Array names = vars.GetPropertyNames();
    for (uint32_t i = 0; i < names.Length(); i++) {
      std::string name = names.Get(i).As<Napi::String>().Utf8Value();
      env[name] = vars.Get(name).As<Napi::String>().Utf8Value();
    }
    AgentConfig config;
    Napi::Array params = options.Get("backendParams").As<Napi::Array>();
    for (uint32_t i = 0; i < params.Length(); i++) {
      Napi::Array pair = params.Get(i).As<Napi::Array>();
      config.backendParams.emplace_back(pair.Get(0u).As<Napi::String>().Utf8Value(), pair.Get(1u).As<Napi::String>().Utf8Value());
    }
    config.progressDelayUs = toUint(options.Get("progressDelayUs"), "progressDelayUs");
    config.readHereBytes = toUint(options.Get("readHereBytes"), "readHereBytes");
    // Configured before the library is published (loadedLibrary): another thread that sees it
    // loaded may create the agent at once, and would otherwise create it with no configuration
    // (a progress thread that polls without waiting, and UCX's default error handling).
    ProcessAgent::configure(config);
    NixlLibrary::load(stringArg(options.Get("library"), "library"), env);
    return info.Env().Undefined();
  });
}

Napi::Value LoadedLibrary(const Napi::CallbackInfo& info) {
  std::string path = NixlLibrary::loadedPath();
  return path.empty() ? info.Env().Undefined() : Napi::String::New(info.Env(), path);
}

Napi::Value AgentName(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    if (!ProcessAgent::started()) return info.Env().Undefined();
    return Napi::String::New(info.Env(), ProcessAgent::instance().name());
  });
}

Napi::Value Acquire(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    Memory m = toMemory(info[0]);
    RegionTable::Key key = ProcessAgent::instance().acquire(m.address, m.length, m.mem, m.device);
    // JavaScript cannot see host addresses: it learns where the memory sits inside its region.
    Napi::Object out = keyObject(info.Env(), key);
    out.Set("offset", Napi::Number::New(info.Env(), static_cast<double>(m.address - key.first)));
    return out;
  });
}

Napi::Value Release(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    ProcessAgent::instance().release(toKey(info[0]));
    return info.Env().Undefined();
  });
}

Napi::Object registrationObject(Napi::Env env, const Region& region) {
  Napi::Object r = keyObject(env, RegionTable::Key(region.address, region.length));
  r.Set("mem", Napi::String::New(env, region.mem == NIXL_CAPI_MEM_VRAM ? "vram" : "dram"));
  r.Set("device", Napi::Number::New(env, static_cast<double>(region.device)));
  r.Set("refs", Napi::Number::New(env, static_cast<double>(region.refs)));
  return r;
}

Napi::Value RegionOf(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    Memory m = toMemory(info[0]);
    if (!ProcessAgent::started()) return info.Env().Undefined();
    std::optional<Region> region = ProcessAgent::instance().regionOf(m.address, m.length, m.mem, m.device);
    return region.has_value() ? Napi::Value(registrationObject(info.Env(), *region)) : info.Env().Undefined();
  });
}

Napi::Value GetLocalMetadata(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    tensorlane::nixl::LocalMetadata md = ProcessAgent::instance().localMetadata();
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("agent", Napi::String::New(info.Env(), md.agent));
    out.Set("blob", Napi::Buffer<char>::Copy(info.Env(), md.blob.data(), md.blob.size()));
    out.Set("epoch", Napi::Number::New(info.Env(), static_cast<double>(md.epoch)));
    return out;
  });
}

Napi::Value Registrations(const Napi::CallbackInfo& info) {
  std::vector<Region> regions = ProcessAgent::started() ? ProcessAgent::instance().registrations() : std::vector<Region>();
  Napi::Array out = Napi::Array::New(info.Env(), regions.size());
  for (uint32_t i = 0; i < regions.size(); i++) out.Set(i, registrationObject(info.Env(), regions[i]));
  return out;
}

/** read(request, keep): request fields come from a peer's metadata, so every one is checked. */
Napi::Value Read(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    if (!info[0].IsObject()) throw Failure(FailureCode::Usage, "read() needs a request object");
    Napi::Object request = info[0].As<Napi::Object>();
    const std::string agent = stringArg(field(request, "agent", "NIXL metadata"), "the NIXL metadata's agent", FailureCode::Protocol);
    Napi::Uint8Array blob = bytesArg(field(request, "blob", "NIXL metadata"), "the NIXL metadata's blob", FailureCode::Protocol);
    uint64_t epoch = toUint(field(request, "epoch", "NIXL metadata"), "NIXL metadata epoch");

    std::vector<RemoteRegion> regions;
    Napi::Array regionArray = toArray(field(request, "regions", "NIXL metadata"), "NIXL metadata regions");
    for (uint32_t i = 0; i < regionArray.Length(); i++) {
      Napi::Value v = regionArray.Get(i);
      if (!v.IsObject()) throw Failure(FailureCode::Protocol, "NIXL metadata: region " + std::to_string(i) + " is not an object");
      Napi::Object r = v.As<Napi::Object>();
      std::string where = "NIXL metadata region " + std::to_string(i);
      RemoteRegion region;
      region.address = toUint(field(r, "address", where), where + " address");
      region.length = toUint(field(r, "length", where), where + " length");
      region.mem = toMem(field(r, "mem", where), where + " mem");
      region.device = toUint(field(r, "device", where), where + " device");
      regions.push_back(region);
    }

    std::vector<RemoteTensor> remote;
    Napi::Array tensorArray = toArray(field(request, "remote", "NIXL metadata"), "NIXL metadata tensors");
    for (uint32_t i = 0; i < tensorArray.Length(); i++) {
      Napi::Value v = tensorArray.Get(i);
      std::string where = "NIXL metadata tensor " + std::to_string(i);
      if (!v.IsObject()) throw Failure(FailureCode::Protocol, where + " is not an object");
      Napi::Object t = v.As<Napi::Object>();
      RemoteTensor tensor;
      uint64_t region = toUint(field(t, "region", where), where + " region");
      if (region > UINT32_MAX) throw Failure(FailureCode::Protocol, where + " names an impossible region");
      tensor.region = static_cast<uint32_t>(region);
      tensor.offset = toUint(field(t, "offset", where), where + " offset");
      tensor.itemSize = toUint(field(t, "itemSize", where), where + " itemSize");
      Napi::Array shape = toArray(field(t, "shape", where), where + " shape");
      Napi::Array strides = toArray(field(t, "strides", where), where + " strides");
      if (shape.Length() > 64 || strides.Length() > 64) throw Failure(FailureCode::Protocol, where + " has too many dimensions");
      for (uint32_t d = 0; d < shape.Length(); d++) tensor.shape.push_back(toUint(shape.Get(d), where + " shape"));
      for (uint32_t d = 0; d < strides.Length(); d++) tensor.strides.push_back(toUint(strides.Get(d), where + " strides"));
      remote.push_back(std::move(tensor));
    }

    std::vector<LocalTensor> local;
    Napi::Array localArray = toArray(field(request, "local", "read request"), "read request destinations");
    for (uint32_t i = 0; i < localArray.Length(); i++) {
      Napi::Object l = localArray.Get(i).As<Napi::Object>();
      Memory tensor = toMemory(l.Get("tensor"));
      Memory storage = toMemory(l.Get("storage"));
      if (tensor.address < storage.address || tensor.address - storage.address > storage.length ||
          tensor.length > storage.length - (tensor.address - storage.address)) {
        throw Failure(FailureCode::Usage, "destination " + std::to_string(i) + " lies outside its storage");
      }
      LocalTensor t;
      t.address = tensor.address;
      t.nbytes = tensor.length;
      t.storageAddress = storage.address;
      t.storageLength = storage.length;
      t.mem = storage.mem;
      t.device = storage.device;
      local.push_back(t);
    }
    auto plan = std::make_unique<ReadPlan>(agent,
                                           std::string(reinterpret_cast<const char*>(blob.Data()), blob.ByteLength()), epoch,
                                           std::move(regions), std::move(remote), std::move(local));
    return ReadJob::Start(info.Env(), std::move(plan), info[1]);
  });
}

}  // namespace

}  // namespace tensorlane::nixl

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  tensorlane::holdThroughTeardown(env);
  exports.Set("load", Napi::Function::New(env, tensorlane::nixl::Load, "load"));
  exports.Set("loadedLibrary", Napi::Function::New(env, tensorlane::nixl::LoadedLibrary, "loadedLibrary"));
  exports.Set("agentName", Napi::Function::New(env, tensorlane::nixl::AgentName, "agentName"));
  exports.Set("acquire", Napi::Function::New(env, tensorlane::nixl::Acquire, "acquire"));
  exports.Set("release", Napi::Function::New(env, tensorlane::nixl::Release, "release"));
  exports.Set("regionOf", Napi::Function::New(env, tensorlane::nixl::RegionOf, "regionOf"));
  exports.Set("localMetadata", Napi::Function::New(env, tensorlane::nixl::GetLocalMetadata, "localMetadata"));
  exports.Set("registrations", Napi::Function::New(env, tensorlane::nixl::Registrations, "registrations"));
  exports.Set("read", Napi::Function::New(env, tensorlane::nixl::Read, "read"));
  return exports;
}

NODE_API_MODULE(tensorlane_nixl, Init)
