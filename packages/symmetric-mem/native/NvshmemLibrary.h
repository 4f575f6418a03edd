// NVSHMEM's host library, dlopened once per process on demand. Every allocation goes through
// `malloc`, which refuses unless nvshmemx_init_status() says the library is initialized: NVSHMEM
// itself would initialize on the spot and exit the process when that fails.
#pragma once

#include "NvshmemApi.h"

#include <napi.h>

#include <mutex>
#include <string>

namespace tlsym {

class NvshmemLibrary {
 public:
  static NvshmemLibrary& instance();

  /** dlopen + dlsym of every entry point; Failure(Library) naming what is missing. */
  void load(const std::string& path);
  bool loaded() const;
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
  void requireLoaded() const;
  void requireInitialized(const char* what) const;

  mutable std::mutex mutex_;
  void* handle_ = nullptr;
  std::string path_;
  NvshmemInitStatusFn initStatus_ = nullptr;
  NvshmemGetUniqueIdFn getUniqueId_ = nullptr;
  NvshmemSetAttrUniqueIdArgsFn setAttrUniqueIdArgs_ = nullptr;
  NvshmemHostlibInitAttrFn hostlibInitAttr_ = nullptr;
  NvshmemVendorVersionFn vendorVersion_ = nullptr;
  NvshmemMallocFn malloc_ = nullptr;
  NvshmemFreeFn free_ = nullptr;
  NvshmemPtrFn ptr_ = nullptr;
  NvshmemPeFn myPe_ = nullptr;
  NvshmemPeFn nPes_ = nullptr;
};

/** Adds the nvshmem* functions to the addon's exports. */
void registerNvshmem(Napi::Env env, Napi::Object exports);

}  // namespace tlsym
