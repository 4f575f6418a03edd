#include "ProcessAgent.h"

#include "NixlLibrary.h"

#include <tensorlane/Failure.h>

#include <unistd.h>

#include <cstdlib>
#include <random>

namespace tensorlane::nixl {

namespace {

std::mutex gConfigMutex;
AgentConfig* gConfig = nullptr;

std::string statusText(int status) { return "NIXL status " + std::to_string(status); }

/** Unique across processes and hosts: pid for humans, random bits for pid reuse. */
std::string uniqueName() {
  char host[64] = {0};
  gethostname(host, sizeof host - 1);
  std::random_device random;
  char suffix[17];
  snprintf(suffix, sizeof suffix, "%08x%08x", random(), random());
  return std::string("tensorlane-") + host + "-" + std::to_string(getpid()) + "-" + suffix;
}

}  // namespace

void ProcessAgent::configure(const AgentConfig& config) {
  std::lock_guard<std::mutex> lock(gConfigMutex);
  if (gConfig == nullptr) gConfig = new AgentConfig(config);
}

uint64_t ProcessAgent::readHereBytes() {
  std::lock_guard<std::mutex> lock(gConfigMutex);
  return gConfig != nullptr ? gConfig->readHereBytes : 0;
}

ProcessAgent& ProcessAgent::instance() {
  // Leaked on purpose: NIXL's threads may still run while static destructors do at exit.
  static ProcessAgent* agent = new ProcessAgent();
  return *agent;
}

bool ProcessAgent::started() {
  ProcessAgent& self = instance();
  std::lock_guard<std::mutex> lock(self.mutex_);
  return self.started_;
}

void ProcessAgent::start() {
  if (started_) return;
  NixlLibrary& nixl = NixlLibrary::get();
  AgentConfig config;
  {
    std::lock_guard<std::mutex> lock(gConfigMutex);
    if (gConfig != nullptr) config = *gConfig;
  }
  nixl_capi_agent_config_t agentConfig{};
  agentConfig.enable_prog_thread = true;
  // Metadata travels with tensorlane's objects: no NIXL listener or etcd.
  agentConfig.enable_listen_thread = false;
  agentConfig.listen_port = 0;
  // Several threads (JS threads, transfer threads) call the agent concurrently.
  agentConfig.thread_sync = NIXL_CAPI_THREAD_SYNC_RW;
  agentConfig.num_workers = 1;
  agentConfig.pthr_delay_us = config.progressDelayUs;
  agentConfig.lthr_delay_us = 100000;
  agentConfig.capture_telemetry = false;
  std::string name = uniqueName();
  nixl_capi_agent_t agent = nullptr;
  int status = nixl.createConfiguredAgent(name.c_str(), &agentConfig, &agent);
  if (status != NIXL_CAPI_SUCCESS) throw Failure(FailureCode::Library, "cannot create a NIXL agent: " + statusText(status));
  nixl_capi_mem_list_t mems = nullptr;
  nixl_capi_params_t params = nullptr;
  status = nixl.getPluginParams(agent, "UCX", &mems, &params);
  if (status != NIXL_CAPI_SUCCESS) {
    nixl.destroyAgent(agent);
    throw Failure(FailureCode::Library,
                  "NIXL has no UCX plugin (" + statusText(status) + "): check NIXL_PLUGIN_DIR, or that the wheel's plugins/ folder sits next to libnixl.so");
  }
  for (const auto& [key, value] : config.backendParams) nixl.paramsAdd(params, key.c_str(), value.c_str());
  nixl_capi_backend_t backend = nullptr;
  status = nixl.createBackend(agent, "UCX", params, &backend);
  nixl.destroyParams(params);
  nixl.destroyMemList(mems);
  if (status != NIXL_CAPI_SUCCESS) {
    nixl.destroyAgent(agent);
    throw Failure(FailureCode::Library,
                  "NIXL cannot create its UCX backend (" + statusText(status) +
                      "); UCX_TLS without tcp needs ucx_error_handling_mode=none (TENSORLANE_NIXL_ERROR_MODE=none)");
  }
  agent_ = agent;
  backend_ = backend;
  name_ = name;
  started_ = true;
}

nixl_capi_agent_t ProcessAgent::handle() {
  std::lock_guard<std::mutex> lock(mutex_);
  start();
  return agent_;
}

const std::string& ProcessAgent::name() {
  std::lock_guard<std::mutex> lock(mutex_);
  start();
  return name_;
}

RegionTable::Key ProcessAgent::acquire(uintptr_t address, size_t length, nixl_capi_mem_type_t mem, uint64_t device) {
  std::lock_guard<std::mutex> lock(mutex_);
  start();
  if (Region* region = regions_.containing(address, length, mem, device)) {
    region->refs++;
    return RegionTable::Key(region->address, region->length);
  }
  if (length == 0) throw Failure(FailureCode::Usage, "cannot register an empty memory region with NIXL");
  NixlLibrary& nixl = NixlLibrary::get();
  Region region;
  region.address = address;
  region.length = length;
  region.mem = mem;
  region.device = device;
  region.refs = 1;
  int status = nixl.createRegDlist(mem, &region.dlist);
  if (status == NIXL_CAPI_SUCCESS) status = nixl.regDlistAddDesc(region.dlist, address, length, device, nullptr, 0);
  if (status == NIXL_CAPI_SUCCESS) status = nixl.registerMem(agent_, region.dlist, nullptr);
  if (status != NIXL_CAPI_SUCCESS) {
    if (region.dlist != nullptr) nixl.destroyRegDlist(region.dlist);
    throw Failure(FailureCode::Registration, "NIXL cannot register " + std::to_string(length) + " bytes of " +
                                                 (mem == NIXL_CAPI_MEM_VRAM ? "VRAM on device " + std::to_string(device) : std::string("DRAM")) +
                                                 ": " + statusText(status));
  }
  regions_.insert(region);
  generation_++;
  return RegionTable::Key(address, length);
}

void ProcessAgent::release(const RegionTable::Key& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  Region* region = regions_.find(key);
  if (region == nullptr) throw Failure(FailureCode::Usage, "releasing a NIXL registration that does not exist");
  if (--region->refs > 0) return;
  NixlLibrary& nixl = NixlLibrary::get();
  int status = nixl.deregisterMem(agent_, region->dlist, nullptr);
  nixl.destroyRegDlist(region->dlist);
  regions_.erase(key);
  epoch_++;
  generation_++;
  if (status != NIXL_CAPI_SUCCESS) throw Failure(FailureCode::Registration, "NIXL cannot deregister a region: " + statusText(status));
}

std::optional<Region> ProcessAgent::regionOf(uintptr_t address, size_t length, nixl_capi_mem_type_t mem, uint64_t device) {
  std::lock_guard<std::mutex> lock(mutex_);
  Region* region = regions_.containing(address, length, mem, device);
  return region == nullptr ? std::nullopt : std::optional<Region>(*region);
}

LocalMetadata ProcessAgent::localMetadata() {
  std::lock_guard<std::mutex> lock(mutex_);
  start();
  if (cachedGeneration_ != generation_) {
    void* data = nullptr;
    size_t length = 0;
    int status = NixlLibrary::get().getLocalMd(agent_, &data, &length);
    if (status != NIXL_CAPI_SUCCESS) throw Failure(FailureCode::Library, "NIXL cannot serialize its metadata: " + statusText(status));
    cachedBlob_.assign(static_cast<const char*>(data), length);
    free(data);
    cachedGeneration_ = generation_;
  }
  return LocalMetadata{name_, cachedBlob_, epoch_};
}

bool ProcessAgent::covers(const std::string& agent, const std::vector<RemoteRegion>& regions) {
  NixlLibrary& nixl = NixlLibrary::get();
  for (nixl_capi_mem_type_t mem : {NIXL_CAPI_MEM_DRAM, NIXL_CAPI_MEM_VRAM}) {
    nixl_capi_xfer_dlist_t dlist = nullptr;
    if (nixl.createXferDlist(mem, &dlist) != NIXL_CAPI_SUCCESS) return false;
    size_t count = 0;
    for (const RemoteRegion& r : regions) {
      if (r.mem != mem) continue;
      nixl.xferDlistAddDesc(dlist, static_cast<uintptr_t>(r.address), static_cast<size_t>(r.length), r.device);
      count++;
    }
    // check_remote_md asks whether every descriptor lies inside a region the remote registered.
    int status = count == 0 ? NIXL_CAPI_SUCCESS : nixl.checkRemoteMd(agent_, agent.c_str(), dlist);
    nixl.destroyXferDlist(dlist);
    if (status != NIXL_CAPI_SUCCESS) return false;
  }
  return true;
}

void ProcessAgent::load(const std::string& agent, const std::string& blob) {
  char* loadedName = nullptr;
  int status = NixlLibrary::get().loadRemoteMd(agent_, blob.data(), blob.size(), &loadedName);
  if (status != NIXL_CAPI_SUCCESS) {
    // The blob passed MetadataBlob's structural check: what fails now is connecting to the agent
    // it describes (UCX creates the endpoint here), which is how a dead producer shows up first.
    throw Failure(FailureCode::Transfer, "cannot connect to the NIXL agent " + agent + " (" + statusText(status) +
                                             "): the producer died, or its connection info is unusable");
  }
  std::string loaded = loadedName != nullptr ? loadedName : "";
  free(loadedName);
  if (loaded != agent) {
    NixlLibrary::get().invalidateRemoteMd(agent_, loaded.c_str());
    throw Failure(FailureCode::Protocol, "NIXL metadata claimed to be " + agent + " describes agent " + loaded);
  }
}

void ProcessAgent::invalidate(std::unique_lock<std::mutex>& lock, const std::string& agent) {
  idle_.wait(lock, [&] { return remotes_[agent].inFlight == 0; });
  NixlLibrary::get().invalidateRemoteMd(agent_, agent.c_str());
  Remote& remote = remotes_[agent];
  remote.loaded = false;
  remote.descs.clear();
}

bool ProcessAgent::beginTransfer(const std::string& agent, const std::string& blob, uint64_t epoch, const std::vector<RemoteRegion>& regions,
                                 const std::vector<RemoteDesc>& descs, bool mayWait) {
  std::unique_lock<std::mutex> lock(mutex_);
  start();
  if (agent == name_) throw Failure(FailureCode::Protocol, "NIXL metadata names this process's own agent " + agent);
  // Unconnected, or with transfers in flight that invalidating its cache would wait for: not without waiting.
  if (!mayWait) {
    auto known = remotes_.find(agent);
    if (known == remotes_.end() || !known->second.loaded || known->second.inFlight > 0) return false;
  }
  Remote& remote = remotes_[agent];
  if (remote.loaded && epoch > remote.epoch) {
    // The producer deregistered memory since we loaded its metadata. A cached descriptor this read
    // could match (it overlaps a region read now) that the producer no longer registers the same
    // way would lend a stale key: drop the cache. So does a cache mostly made of dead entries.
    bool stale = remote.descs.size() > 2 * descs.size() + 64;
    for (const RemoteDesc& cached : remote.descs) {
      if (stale) break;
      bool current = false;
      for (const RemoteDesc& d : descs) current = current || d == cached;
      if (current) continue;
      for (const RemoteRegion& r : regions) stale = stale || cached.overlaps(r);
    }
    if (stale) invalidate(lock, agent);
  }
  Remote& current = remotes_[agent];
  if (!current.loaded || !covers(agent, regions)) {
    try {
      load(agent, blob);
    } catch (const Failure&) {
      // A cached agent whose regions changed keys (same range registered anew) refuses the
      // update: start over from this metadata alone.
      if (!current.loaded) {
        remotes_.erase(agent);
        throw;
      }
      invalidate(lock, agent);
      try {
        load(agent, blob);
      } catch (const Failure&) {
        remotes_.erase(agent);
        throw;
      }
    }
    Remote& loaded = remotes_[agent];
    loaded.loaded = true;
    for (const RemoteDesc& d : descs) {
      bool known = false;
      for (const RemoteDesc& cached : loaded.descs) known = known || cached == d;
      if (!known) loaded.descs.push_back(d);
    }
    if (!covers(agent, regions)) {
      throw Failure(FailureCode::Protocol, "the metadata of " + agent + " declares regions its NIXL metadata does not register");
    }
  }
  Remote& ready = remotes_[agent];
  if (epoch > ready.epoch) ready.epoch = epoch;
  ready.inFlight++;
  return true;
}

void ProcessAgent::endTransfer(const std::string& agent) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = remotes_.find(agent);
  if (it != remotes_.end() && it->second.inFlight > 0) it->second.inFlight--;
  if (it != remotes_.end() && it->second.inFlight == 0 && it->second.forget) erase(lock, agent);
  idle_.notify_all();
}

void ProcessAgent::forgetRemote(const std::string& agent) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = remotes_.find(agent);
  if (it == remotes_.end() || !it->second.loaded) return;
  if (it->second.inFlight > 0) {
    it->second.forget = true;
    return;
  }
  erase(lock, agent);
}

void ProcessAgent::erase(std::unique_lock<std::mutex>& lock, const std::string& agent) {
  invalidate(lock, agent);
  remotes_.erase(agent);
}

std::vector<Region> ProcessAgent::registrations() {
  std::lock_guard<std::mutex> lock(mutex_);
  return regions_.all();
}

}  // namespace tensorlane::nixl
