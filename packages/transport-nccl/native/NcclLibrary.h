// libnccl.so.2, loaded once per process (a ProcessLibrary, which every JS thread's addon instance
// shares) with the entry points this addon uses. Functions of later NCCL versions are optional: null when the
// loaded library predates them, and their features are refused with a version failure.
#pragma once

#include "NcclApi.h"

#include <tensorlane/DynamicLibrary.h>

#include <string>

namespace tensorlane::nccl {

class NcclLibrary : public ProcessLibrary<NcclLibrary> {
 public:
  static constexpr const char* kName = "libnccl.so.2";

  ncclGetVersion_fn getVersion = nullptr;
  ncclGetUniqueId_fn getUniqueId = nullptr;
  ncclGetErrorString_fn getErrorString = nullptr;
  ncclGetLastError_fn getLastError = nullptr;
  ncclCommInitRankConfig_fn commInitRankConfig = nullptr;
  ncclCommGetAsyncError_fn commGetAsyncError = nullptr;
  ncclCommFinalize_fn commFinalize = nullptr;
  ncclCommDestroy_fn commDestroy = nullptr;
  ncclCommAbort_fn commAbort = nullptr;
  ncclGroupStart_fn groupStart = nullptr;
  ncclGroupEnd_fn groupEnd = nullptr;
  ncclSend_fn send = nullptr;
  ncclRecv_fn recv = nullptr;
  ncclAllReduce_fn allReduce = nullptr;
  ncclBroadcast_fn broadcast = nullptr;
  ncclCommRegister_fn commRegister = nullptr;
  ncclCommDeregister_fn commDeregister = nullptr;
  ncclMemAlloc_fn memAlloc = nullptr;
  ncclMemFree_fn memFree = nullptr;
  ncclCommWindowRegister_fn commWindowRegister = nullptr;
  ncclCommWindowDeregister_fn commWindowDeregister = nullptr;

  /** ncclGetVersion's code (major * 10000 + minor * 100 + patch). */
  int version = 0;

  /** Opens `path` with every entry point (ProcessLibrary::load calls it once per process). */
  static NcclLibrary* open(const std::string& path);

  /** "ncclInvalidUsage: <NCCL's string> (<last error>)" for messages. */
  std::string describe(ncclResult_t result, ncclComm_t comm = nullptr) const;
};

}  // namespace tensorlane::nccl
