#include "NixlLibrary.h"

#include <stdlib.h>

#include <memory>

namespace tensorlane::nixl {

NixlLibrary& NixlLibrary::load(const std::string& path, const std::map<std::string, std::string>& env) {
  return ProcessLibrary::load(path, [&env](const std::string& file) {
    for (const auto& [key, value] : env) setenv(key.c_str(), value.c_str(), 0);
    return open(file);
  });
}

NixlLibrary* NixlLibrary::open(const std::string& path) {
  // RTLD_LOCAL (DynamicLibrary): NIXL's bundled UCX and grpc must not interpose on anything else.
  DynamicLibrary lib(path);
  auto nixl = std::make_unique<NixlLibrary>();
  lib.require(nixl->createConfiguredAgent, "nixl_capi_create_configured_agent");
  lib.require(nixl->destroyAgent, "nixl_capi_destroy_agent");
  lib.require(nixl->getPluginParams, "nixl_capi_get_plugin_params");
  lib.require(nixl->paramsAdd, "nixl_capi_params_add");
  lib.require(nixl->destroyParams, "nixl_capi_destroy_params");
  lib.require(nixl->destroyMemList, "nixl_capi_destroy_mem_list");
  lib.require(nixl->createBackend, "nixl_capi_create_backend");
  lib.require(nixl->destroyBackend, "nixl_capi_destroy_backend");
  lib.require(nixl->createRegDlist, "nixl_capi_create_reg_dlist");
  lib.require(nixl->regDlistAddDesc, "nixl_capi_reg_dlist_add_desc");
  lib.require(nixl->destroyRegDlist, "nixl_capi_destroy_reg_dlist");
  lib.require(nixl->registerMem, "nixl_capi_register_mem");
  lib.require(nixl->deregisterMem, "nixl_capi_deregister_mem");
  lib.require(nixl->getLocalMd, "nixl_capi_get_local_md");
  lib.require(nixl->loadRemoteMd, "nixl_capi_load_remote_md");
  lib.require(nixl->invalidateRemoteMd, "nixl_capi_invalidate_remote_md");
  lib.require(nixl->checkRemoteMd, "nixl_capi_check_remote_md");
  lib.require(nixl->createXferDlist, "nixl_capi_create_xfer_dlist");
  lib.require(nixl->xferDlistAddDesc, "nixl_capi_xfer_dlist_add_desc");
  lib.require(nixl->destroyXferDlist, "nixl_capi_destroy_xfer_dlist");
  lib.require(nixl->createXferReq, "nixl_capi_create_xfer_req");
  lib.require(nixl->postXferReq, "nixl_capi_post_xfer_req");
  lib.require(nixl->getXferStatus, "nixl_capi_get_xfer_status");
  lib.require(nixl->releaseXferReq, "nixl_capi_release_xfer_req");
  lib.require(nixl->destroyXferReq, "nixl_capi_destroy_xfer_req");
  lib.check("the C API of nixl 1.5.x this addon was written for");
  return nixl.release();
}

}  // namespace tensorlane::nixl
