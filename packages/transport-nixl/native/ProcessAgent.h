// The process's one NIXL agent, shared by every JS thread (the main thread calls
// registerNixlMemory, the transfer agent worker serves and fetches objects).
//
// Why a static here: Node loads this .node file once per thread that requires it, but the dynamic
// linker maps the shared object only once per process, so its statics are process-wide. Every
// thread therefore reaches the same agent, the same registrations and the same reference counts,
// and a registration made on the main thread is visible to transfers run by the worker.
//
// The agent is created lazily (first registration or fetch), with NIXL's progress thread: the
// producer's side of a one-sided READ must progress while its JS threads are busy. It lives until
// the process exits, like pinned registrations.
#pragma once

#include "NixlCapi.h"
#include "RegionTable.h"
#include "RemoteMemory.h"

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tensorlane::nixl {

struct AgentConfig {
  /** UCX backend parameters (ucx_error_handling_mode, ...), added to the plugin's defaults. */
  std::vector<std::pair<std::string, std::string>> backendParams;
  /** NIXL's progress thread delay in microseconds. */
  uint64_t progressDelayUs = 0;
  /** The most bytes a READ may copy on the thread that asks for it (ReadJob). */
  uint64_t readHereBytes = 0;
};

struct LocalMetadata {
  std::string agent;
  std::string blob;
  uint64_t epoch = 0;
};

class ProcessAgent {
 public:
  /** Stores the configuration for the agent created later; the first configuration wins. */
  static void configure(const AgentConfig& config);
  /** The configured AgentConfig::readHereBytes (0 before any configuration). */
  static uint64_t readHereBytes();
  static ProcessAgent& instance();

  /** Whether the agent exists (registrations and fetches create it). */
  static bool started();

  nixl_capi_agent_t handle();
  const std::string& name();

  /**
   * Adds one reference to the registered region holding [address, address + length), registering
   * [address, address + length) itself when no region holds it. Returns the region's key.
   */
  RegionTable::Key acquire(uintptr_t address, size_t length, nixl_capi_mem_type_t mem, uint64_t device);

  /** Drops one reference; the last one deregisters the region and bumps the epoch. */
  void release(const RegionTable::Key& key);

  /** The live registered region holding [address, address + length), if any (a copy). */
  std::optional<Region> regionOf(uintptr_t address, size_t length, nixl_capi_mem_type_t mem, uint64_t device);

  /** This agent's metadata blob (cached until the registrations change) and its epoch. */
  LocalMetadata localMetadata();

  /**
   * Makes the remote agent's regions usable for transfers and counts one transfer in flight to it
   * until endTransfer. The cache of that agent's metadata (NIXL's remote section, mirrored in
   * Remote::descs) is used as is while it covers `regions`, extended by loading `blob` when it
   * does not, and invalidated when the producer deregistered memory since it was loaded (a newer
   * epoch) in a way that touches this read: a cached descriptor that overlaps a region read now
   * but is not registered identically any more. Throws a Transfer failure when the agent cannot be
   * connected and a Protocol failure when its metadata does not register `regions`. Without
   * `mayWait`, returns false instead of beginning unless that agent is connected already (its
   * metadata loaded once) and no other transfer from it is in flight: invalidating its cache then
   * waits for nothing.
   */
  bool beginTransfer(const std::string& agent, const std::string& blob, uint64_t epoch, const std::vector<RemoteRegion>& regions,
                     const std::vector<RemoteDesc>& descs, bool mayWait);
  void endTransfer(const std::string& agent);

  /**
   * Forgets a remote agent whose transfer failed, so that a later object from it reloads: at once
   * when no transfer from it is in flight, else when the last one ends (never waits).
   */
  void forgetRemote(const std::string& agent);

  std::vector<Region> registrations();

 private:
  ProcessAgent() = default;
  void start();
  bool covers(const std::string& agent, const std::vector<RemoteRegion>& regions);
  void load(const std::string& agent, const std::string& blob);

  std::mutex mutex_;
  std::condition_variable idle_;
  bool started_ = false;
  nixl_capi_agent_t agent_ = nullptr;
  nixl_capi_backend_t backend_ = nullptr;
  std::string name_;
  RegionTable regions_;
  /** Bumped by every deregistration: consumers holding older metadata of ours must reload it. */
  uint64_t epoch_ = 0;
  /** Bumped by every registration change; the cached metadata blob belongs to one generation. */
  uint64_t generation_ = 0;
  uint64_t cachedGeneration_ = UINT64_MAX;
  std::string cachedBlob_;

  struct Remote {
    uint64_t epoch = 0;
    uint64_t inFlight = 0;
    bool loaded = false;
    /** A transfer from it failed while others were in flight: forgotten once the last one ends. */
    bool forget = false;
    /** Every descriptor loaded into NIXL for this agent since the last invalidation. */
    std::vector<RemoteDesc> descs;
  };
  /** Drops NIXL's cache of `agent` once no transfer uses it. */
  void invalidate(std::unique_lock<std::mutex>& lock, const std::string& agent);
  /** Invalidates and erases `agent`, which no transfer uses. */
  void erase(std::unique_lock<std::mutex>& lock, const std::string& agent);
  std::map<std::string, Remote> remotes_;
};

}  // namespace tensorlane::nixl
