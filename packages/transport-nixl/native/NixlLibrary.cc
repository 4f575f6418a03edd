#include "NixlLibrary.h"

#include "Failure.h"

#include <RuntimeLibrary.h>
#include <dlfcn.h>
#include <stdlib.h>

namespace tlnixl {

namespace {

// Shared by every thread of the process (the addon is loaded once per thread, this library once).
std::mutex gMutex;
NixlLibrary* gLibrary = nullptr;

}  // namespace

NixlLibrary& NixlLibrary::load(const std::string& path, const std::map<std::string, std::string>& env) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gLibrary != nullptr) {
    if (gLibrary->path_ != path) {
      throw Failure(FailureCode::Usage, "libnixl_capi.so is already loaded from " + gLibrary->path_ + ", cannot load " + path + " as well");
    }
    return *gLibrary;
  }
  for (const auto& [key, value] : env) setenv(key.c_str(), value.c_str(), 0);
  // RTLD_LOCAL (openRuntimeLibrary): NIXL's bundled UCX and grpc must not interpose on anything else.
  std::string error;
  void* handle = tensorlane::openRuntimeLibrary(path, error);
  if (handle == nullptr) throw Failure(FailureCode::Library, error);
  auto* library = new NixlLibrary();
  try {
    library->resolve(handle, path);
  } catch (...) {
    delete library;
    dlclose(handle);
    throw;
  }
  // Never unloaded: UCX threads and atexit handlers of the library outlive any addon instance.
  gLibrary = library;
  return *gLibrary;
}

NixlLibrary& NixlLibrary::get() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gLibrary == nullptr) throw Failure(FailureCode::Library, "libnixl_capi.so is not loaded");
  return *gLibrary;
}

std::string NixlLibrary::loadedPath() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gLibrary == nullptr ? std::string() : gLibrary->path_;
}

void NixlLibrary::resolve(void* handle, const std::string& path) {
  tensorlane::EntryPoints symbol(handle);
  symbol(createConfiguredAgent, "nixl_capi_create_configured_agent");
  symbol(destroyAgent, "nixl_capi_destroy_agent");
  symbol(getPluginParams, "nixl_capi_get_plugin_params");
  symbol(paramsAdd, "nixl_capi_params_add");
  symbol(destroyParams, "nixl_capi_destroy_params");
  symbol(destroyMemList, "nixl_capi_destroy_mem_list");
  symbol(createBackend, "nixl_capi_create_backend");
  symbol(destroyBackend, "nixl_capi_destroy_backend");
  symbol(createRegDlist, "nixl_capi_create_reg_dlist");
  symbol(regDlistAddDesc, "nixl_capi_reg_dlist_add_desc");
  symbol(destroyRegDlist, "nixl_capi_destroy_reg_dlist");
  symbol(registerMem, "nixl_capi_register_mem");
  symbol(deregisterMem, "nixl_capi_deregister_mem");
  symbol(getLocalMd, "nixl_capi_get_local_md");
  symbol(loadRemoteMd, "nixl_capi_load_remote_md");
  symbol(invalidateRemoteMd, "nixl_capi_invalidate_remote_md");
  symbol(checkRemoteMd, "nixl_capi_check_remote_md");
  symbol(createXferDlist, "nixl_capi_create_xfer_dlist");
  symbol(xferDlistAddDesc, "nixl_capi_xfer_dlist_add_desc");
  symbol(destroyXferDlist, "nixl_capi_destroy_xfer_dlist");
  symbol(createXferReq, "nixl_capi_create_xfer_req");
  symbol(postXferReq, "nixl_capi_post_xfer_req");
  symbol(getXferStatus, "nixl_capi_get_xfer_status");
  symbol(releaseXferReq, "nixl_capi_release_xfer_req");
  symbol(destroyXferReq, "nixl_capi_destroy_xfer_req");
  if (!symbol.missing().empty()) {
    throw Failure(FailureCode::Library, path + " lacks " + symbol.missing() + ": it is not the C API of nixl 1.5.x this addon was written for");
  }
  path_ = path;
}

}  // namespace tlnixl
