#include "NcclLibrary.h"

#include <memory>

namespace tensorlane::nccl {

NcclLibrary* NcclLibrary::open(const std::string& path) {
  DynamicLibrary lib(path);
  auto nccl = std::make_unique<NcclLibrary>();
  lib.require(nccl->getVersion, "ncclGetVersion");
  lib.require(nccl->getUniqueId, "ncclGetUniqueId");
  lib.require(nccl->getErrorString, "ncclGetErrorString");
  lib.require(nccl->commInitRankConfig, "ncclCommInitRankConfig");
  lib.require(nccl->commGetAsyncError, "ncclCommGetAsyncError");
  lib.require(nccl->commFinalize, "ncclCommFinalize");
  lib.require(nccl->commDestroy, "ncclCommDestroy");
  lib.require(nccl->commAbort, "ncclCommAbort");
  lib.require(nccl->groupStart, "ncclGroupStart");
  lib.require(nccl->groupEnd, "ncclGroupEnd");
  lib.require(nccl->send, "ncclSend");
  lib.require(nccl->recv, "ncclRecv");
  lib.require(nccl->allReduce, "ncclAllReduce");
  lib.require(nccl->broadcast, "ncclBroadcast");
  lib.optional(nccl->getLastError, "ncclGetLastError");
  lib.optional(nccl->commRegister, "ncclCommRegister");
  lib.optional(nccl->commDeregister, "ncclCommDeregister");
  lib.optional(nccl->memAlloc, "ncclMemAlloc");
  lib.optional(nccl->memFree, "ncclMemFree");
  lib.optional(nccl->commWindowRegister, "ncclCommWindowRegister");
  lib.optional(nccl->commWindowDeregister, "ncclCommWindowDeregister");
  lib.check("NCCL >= 2.14 (nonblocking communicators need ncclCommInitRankConfig)");
  if (nccl->getVersion(&nccl->version) != ncclSuccess) nccl->version = 0;
  return nccl.release();
}

std::string NcclLibrary::describe(ncclResult_t result, ncclComm_t comm) const {
  static const char* names[] = {"ncclSuccess",     "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
                                "ncclInvalidArgument", "ncclInvalidUsage",   "ncclRemoteError", "ncclInProgress"};
  std::string out = result >= 0 && result <= 7 ? names[result] : "ncclResult " + std::to_string(result);
  const char* text = getErrorString(result);
  if (text != nullptr) out += std::string(": ") + text;
  const char* last = getLastError != nullptr ? getLastError(comm) : nullptr;
  if (last != nullptr && last[0] != '\0') out += std::string(" (") + last + ")";
  return out;
}

}  // namespace tensorlane::nccl
