// NVSHMEM's host library, loaded once per process on demand (a ProcessLibrary). Every allocation
// goes through `malloc`, which refuses unless nvshmemx_init_status() says the library is
// initialized: NVSHMEM itself would initialize on the spot and exit the process when that fails.
#pragma once

#include "NvshmemApi.h"

#include <tensorlane/DynamicLibrary.h>

#include <napi.h>

#include <mutex>
#include <string>

namespace tensorlane::symmetric {

class NvshmemLibrary {
 public:
  static NvshmemLibrary& instance();

  /** dlopen + dlsym of every entry point; Failure(Library) naming what is missing. */
  void load(const std::string& path);
  /** Where it was loaded from; "" before load(). */
  std::string path() const;
  /** "major.minor.patch" of the loaded library. */
  std::string version() const;
  int status() const;
  /** Rank 0's unique id for the bootstrap (128 bytes). */
  std::string uniqueId() const;
  /** nvshmemx_hostlib_init_attr with a unique-id bootstrap; returns its status code, never exits. */
  int initialize(int rank, int worldSize, const std::string& uniqueId);
  void* malloc(size_t bytes);
  void free(void* pointer);
  void* peer(const void* pointer, int pe) const;
  int myPe() const;
  int nPes() const;

 private:
  struct Api : ProcessLibrary<Api> {
    static constexpr const char* kName = "NVSHMEM's host library";
    static Api* open(const std::string& path);

    NvshmemInitStatusFn initStatus = nullptr;
    NvshmemGetUniqueIdFn getUniqueId = nullptr;
    NvshmemSetAttrUniqueIdArgsFn setAttrUniqueIdArgs = nullptr;
    NvshmemHostlibInitAttrFn hostlibInitAttr = nullptr;
    NvshmemVendorVersionFn vendorVersion = nullptr;
    NvshmemMallocFn malloc = nullptr;
    NvshmemFreeFn free = nullptr;
    NvshmemPtrFn ptr = nullptr;
    NvshmemPeFn myPe = nullptr;
    NvshmemPeFn nPes = nullptr;
  };

  /** The loaded library, once nvshmemx_init_status() says it is initialized; a Usage failure naming `what` otherwise. */
  const Api& initialized(const char* what) const;

  // Serializes the calls into NVSHMEM.
  mutable std::mutex mutex_;
};

/** Adds the nvshmem* functions to the addon's exports. */
void registerNvshmem(Napi::Env env, Napi::Object exports);

}  // namespace tensorlane::symmetric
