// libnixl_capi.so, loaded once per process (a ProcessLibrary) with every entry point this addon uses.
#pragma once

#include "NixlCapi.h"

#include <tensorlane/DynamicLibrary.h>

#include <map>
#include <string>

namespace tensorlane::nixl {

class NixlLibrary : public ProcessLibrary<NixlLibrary> {
 public:
  static constexpr const char* kName = "libnixl_capi.so";

  nixl_create_configured_agent_fn createConfiguredAgent = nullptr;
  nixl_destroy_agent_fn destroyAgent = nullptr;
  nixl_get_plugin_params_fn getPluginParams = nullptr;
  nixl_params_add_fn paramsAdd = nullptr;
  nixl_destroy_params_fn destroyParams = nullptr;
  nixl_destroy_mem_list_fn destroyMemList = nullptr;
  nixl_create_backend_fn createBackend = nullptr;
  nixl_destroy_backend_fn destroyBackend = nullptr;
  nixl_create_reg_dlist_fn createRegDlist = nullptr;
  nixl_reg_dlist_add_desc_fn regDlistAddDesc = nullptr;
  nixl_destroy_reg_dlist_fn destroyRegDlist = nullptr;
  nixl_register_mem_fn registerMem = nullptr;
  nixl_deregister_mem_fn deregisterMem = nullptr;
  nixl_get_local_md_fn getLocalMd = nullptr;
  nixl_load_remote_md_fn loadRemoteMd = nullptr;
  nixl_invalidate_remote_md_fn invalidateRemoteMd = nullptr;
  nixl_check_remote_md_fn checkRemoteMd = nullptr;
  nixl_create_xfer_dlist_fn createXferDlist = nullptr;
  nixl_xfer_dlist_add_desc_fn xferDlistAddDesc = nullptr;
  nixl_destroy_xfer_dlist_fn destroyXferDlist = nullptr;
  nixl_create_xfer_req_fn createXferReq = nullptr;
  nixl_post_xfer_req_fn postXferReq = nullptr;
  nixl_get_xfer_status_fn getXferStatus = nullptr;
  nixl_release_xfer_req_fn releaseXferReq = nullptr;
  nixl_destroy_xfer_req_fn destroyXferReq = nullptr;

  /**
   * Sets `env` in the process environment (existing values win: a user's setting is respected),
   * then dlopens `path`. UCX reads its variables with getenv() when the library initializes, and
   * Node's worker threads keep a private copy of process.env, so only this reaches the library.
   * Loading again with the same path is a no-op; another path is a usage failure.
   */
  static NixlLibrary& load(const std::string& path, const std::map<std::string, std::string>& env);

  /** Opens `path` with every entry point. */
  static NixlLibrary* open(const std::string& path);
};

}  // namespace tensorlane::nixl
