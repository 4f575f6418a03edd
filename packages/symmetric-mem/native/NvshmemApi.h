// The few NVSHMEM host-library declarations the nvshmem backend uses, declared here so that no
// NVSHMEM header is needed to build (the library is dlopened at run time). Layouts follow
// NVSHMEM 3.x (nvshmemx_init_attr_t v2: 144 bytes; unique id: 128 bytes).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensorlane::symmetric {

constexpr unsigned kNvshmemInitWithUniqueId = 1u << 3;

/** nvshmemx_init_status() values. */
enum NvshmemStatus {
  kNvshmemNotInitialized = 0,
  kNvshmemIsBootstrapped = 1,
  kNvshmemIsInitialized = 2,
};

struct NvshmemUniqueId {
  int version;
  char internal[124];
};
static_assert(sizeof(NvshmemUniqueId) == 128, "nvshmemx_uniqueid_t is 128 bytes");

struct NvshmemUniqueIdArgs {
  int version;
  NvshmemUniqueId* id;
  int myrank;
  int nranks;
};
static_assert(sizeof(NvshmemUniqueIdArgs) == 24, "nvshmemx_uniqueid_args_t is 24 bytes");

struct NvshmemInitArgs {
  int version;
  NvshmemUniqueIdArgs uidArgs;
  int reserved;
  char content[92];
};
static_assert(sizeof(NvshmemInitArgs) == 128, "nvshmemx_init_args_t is 128 bytes");

struct NvshmemInitAttr {
  int version;
  void* mpiComm;
  NvshmemInitArgs args;
};
static_assert(sizeof(NvshmemInitAttr) == 144, "nvshmemx_init_attr_t is 144 bytes");

/** What NVSHMEMX_INIT_ATTR_INITIALIZER and NVSHMEMX_UNIQUEID_INITIALIZER set. */
inline NvshmemInitAttr nvshmemInitAttr() {
  NvshmemInitAttr attr{};
  attr.version = (2 << 16) + static_cast<int>(sizeof(NvshmemInitAttr));
  attr.args.version = (2 << 16) + static_cast<int>(sizeof(NvshmemInitArgs));
  attr.args.uidArgs.version = (1 << 16) + static_cast<int>(sizeof(NvshmemUniqueIdArgs));
  attr.args.uidArgs.myrank = -1;
  attr.args.uidArgs.nranks = -1;
  attr.args.reserved = -1;
  return attr;
}

inline NvshmemUniqueId nvshmemUniqueId() {
  NvshmemUniqueId id{};
  id.version = (1 << 16) + static_cast<int>(sizeof(NvshmemUniqueId));
  return id;
}

using NvshmemInitStatusFn = int (*)();
using NvshmemGetUniqueIdFn = int (*)(NvshmemUniqueId*);
using NvshmemSetAttrUniqueIdArgsFn = int (*)(int, int, const NvshmemUniqueId*, NvshmemInitAttr*);
using NvshmemHostlibInitAttrFn = int (*)(unsigned, NvshmemInitAttr*);
using NvshmemHostlibFinalizeFn = void (*)();
using NvshmemVendorVersionFn = void (*)(int*, int*, int*);
using NvshmemMallocFn = void* (*)(size_t);
using NvshmemFreeFn = void (*)(void*);
using NvshmemPeFn = int (*)();
using NvshmemPtrFn = void* (*)(const void*, int);

}  // namespace tensorlane::symmetric
