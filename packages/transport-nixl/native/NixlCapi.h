// Hand-declared types and prototypes of NIXL's C API (libnixl_capi.so) as shipped in the PyPI
// wheel nixl-cu12 1.5.1, which has no headers. Only what this addon calls is declared.
//
// Source: ai-dynamo/nixl src/bindings/rust/wrapper.h, checked against the 1.5.1 .so itself
// (nm -D, objdump): the repository head differs, so do not replace this with its header.
//   * nixl_capi_agent_config_t: listen_port is an int at offset 4 (the head has uint16_t).
//   * create_reg_dlist / create_xfer_dlist take 2 arguments (no `sorted` flag).
//   * get_local_md returns a malloc()ed buffer and load_remote_md a strdup()ed name: free() both.
//   * every NIXL error except INVALID_PARAM (-1), NOT_FOUND (-6) and NO_TELEMETRY (-5) comes back
//     as -2, REMOTE_DISCONNECT included, so a dead peer is only known from the context.
//   * create_backend rejects NULL params: start from get_plugin_params.
//   * release_xfer_req releases NIXL's request, destroy_xfer_req frees the C wrapper: both, in order.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

enum nixl_capi_status_t : int {
  NIXL_CAPI_SUCCESS = 0,
  NIXL_CAPI_ERROR_INVALID_PARAM = -1,
  NIXL_CAPI_ERROR_BACKEND = -2,
  NIXL_CAPI_ERROR_NOT_FOUND = -6,
  NIXL_CAPI_IN_PROG = 1,
};

enum nixl_capi_mem_type_t : int { NIXL_CAPI_MEM_DRAM = 0, NIXL_CAPI_MEM_VRAM = 1 };

enum nixl_capi_xfer_op_t : int { NIXL_CAPI_XFER_OP_READ = 0 };

enum nixl_capi_thread_sync_t : int { NIXL_CAPI_THREAD_SYNC_RW = 2 };

// Layout of 1.5.1, read from the disassembly of create_configured_agent (sizeof 40).
struct nixl_capi_agent_config_t {
  bool enable_prog_thread;
  bool enable_listen_thread;
  int listen_port;
  nixl_capi_thread_sync_t thread_sync;
  unsigned int num_workers;
  uint64_t pthr_delay_us;
  uint64_t lthr_delay_us;
  bool capture_telemetry;
};
static_assert(sizeof(nixl_capi_agent_config_t) == 40, "nixl 1.5.1 agent config layout");

typedef struct nixl_capi_agent_s* nixl_capi_agent_t;
typedef struct nixl_capi_params_s* nixl_capi_params_t;
typedef struct nixl_capi_mem_list_s* nixl_capi_mem_list_t;
typedef struct nixl_capi_backend_s* nixl_capi_backend_t;
typedef struct nixl_capi_opt_args_s* nixl_capi_opt_args_t;
typedef struct nixl_capi_xfer_dlist_s* nixl_capi_xfer_dlist_t;
typedef struct nixl_capi_reg_dlist_s* nixl_capi_reg_dlist_t;
typedef struct nixl_capi_xfer_req_s* nixl_capi_xfer_req_t;

typedef nixl_capi_status_t (*nixl_create_configured_agent_fn)(const char*, const nixl_capi_agent_config_t*, nixl_capi_agent_t*);
typedef nixl_capi_status_t (*nixl_destroy_agent_fn)(nixl_capi_agent_t);
typedef nixl_capi_status_t (*nixl_get_plugin_params_fn)(nixl_capi_agent_t, const char*, nixl_capi_mem_list_t*, nixl_capi_params_t*);
typedef nixl_capi_status_t (*nixl_params_add_fn)(nixl_capi_params_t, const char*, const char*);
typedef nixl_capi_status_t (*nixl_destroy_params_fn)(nixl_capi_params_t);
typedef nixl_capi_status_t (*nixl_destroy_mem_list_fn)(nixl_capi_mem_list_t);
typedef nixl_capi_status_t (*nixl_create_backend_fn)(nixl_capi_agent_t, const char*, nixl_capi_params_t, nixl_capi_backend_t*);
typedef nixl_capi_status_t (*nixl_destroy_backend_fn)(nixl_capi_backend_t);
typedef nixl_capi_status_t (*nixl_create_reg_dlist_fn)(nixl_capi_mem_type_t, nixl_capi_reg_dlist_t*);
typedef nixl_capi_status_t (*nixl_reg_dlist_add_desc_fn)(nixl_capi_reg_dlist_t, uintptr_t, size_t, uint64_t, const void*, size_t);
typedef nixl_capi_status_t (*nixl_destroy_reg_dlist_fn)(nixl_capi_reg_dlist_t);
typedef nixl_capi_status_t (*nixl_register_mem_fn)(nixl_capi_agent_t, nixl_capi_reg_dlist_t, nixl_capi_opt_args_t);
typedef nixl_capi_status_t (*nixl_deregister_mem_fn)(nixl_capi_agent_t, nixl_capi_reg_dlist_t, nixl_capi_opt_args_t);
typedef nixl_capi_status_t (*nixl_get_local_md_fn)(nixl_capi_agent_t, void**, size_t*);
typedef nixl_capi_status_t (*nixl_load_remote_md_fn)(nixl_capi_agent_t, const void*, size_t, char**);
typedef nixl_capi_status_t (*nixl_invalidate_remote_md_fn)(nixl_capi_agent_t, const char*);
typedef nixl_capi_status_t (*nixl_check_remote_md_fn)(nixl_capi_agent_t, const char*, nixl_capi_xfer_dlist_t);
typedef nixl_capi_status_t (*nixl_create_xfer_dlist_fn)(nixl_capi_mem_type_t, nixl_capi_xfer_dlist_t*);
typedef nixl_capi_status_t (*nixl_xfer_dlist_add_desc_fn)(nixl_capi_xfer_dlist_t, uintptr_t, size_t, uint64_t);
typedef nixl_capi_status_t (*nixl_destroy_xfer_dlist_fn)(nixl_capi_xfer_dlist_t);
typedef nixl_capi_status_t (*nixl_create_xfer_req_fn)(nixl_capi_agent_t, nixl_capi_xfer_op_t, nixl_capi_xfer_dlist_t, nixl_capi_xfer_dlist_t,
                                                      const char*, nixl_capi_xfer_req_t*, nixl_capi_opt_args_t);
typedef nixl_capi_status_t (*nixl_post_xfer_req_fn)(nixl_capi_agent_t, nixl_capi_xfer_req_t, nixl_capi_opt_args_t);
typedef nixl_capi_status_t (*nixl_get_xfer_status_fn)(nixl_capi_agent_t, nixl_capi_xfer_req_t);
typedef nixl_capi_status_t (*nixl_release_xfer_req_fn)(nixl_capi_agent_t, nixl_capi_xfer_req_t);
typedef nixl_capi_status_t (*nixl_destroy_xfer_req_fn)(nixl_capi_xfer_req_t);

}  // extern "C"
