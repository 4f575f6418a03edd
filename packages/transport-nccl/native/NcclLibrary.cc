#include "NcclLibrary.h"

#include "DynamicLibrary.h"
#include "Failure.h"

#include <mutex>

namespace tlnccl {

namespace {

// Shared by every thread of the process; never unloaded (NCCL's proxy threads outlive any addon instance).
std::mutex gMutex;
NcclLibrary* gLibrary = nullptr;

}  // namespace

NcclLibrary& NcclLibrary::load(const std::string& path) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gLibrary != nullptr) {
    if (gLibrary->path_ != path) {
      throw Failure(FailureCode::Usage, "libnccl.so.2 is already loaded from " + gLibrary->path_ + ", cannot load " + path + " as well");
    }
    return *gLibrary;
  }
  DynamicLibrary lib(path);
  auto* nccl = new NcclLibrary();
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
  try {
    lib.check("NCCL >= 2.14 (nonblocking communicators need ncclCommInitRankConfig)");
  } catch (...) {
    delete nccl;
    throw;
  }
  if (nccl->getVersion(&nccl->version) != ncclSuccess) nccl->version = 0;
  nccl->path_ = path;
  gLibrary = nccl;
  return *gLibrary;
}

NcclLibrary& NcclLibrary::get() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gLibrary == nullptr) throw Failure(FailureCode::Library, "libnccl.so.2 is not loaded");
  return *gLibrary;
}

std::string NcclLibrary::loadedPath() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gLibrary == nullptr ? std::string() : gLibrary->path_;
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

}  // namespace tlnccl
