// The parts of NCCL's and the CUDA runtime's C APIs this addon calls, declared by hand (as vLLM's
// pynccl does): no CUDA or NCCL header is needed to build, and both libraries are dlopened at run
// time (NcclLibrary, CudaRuntime). Values are those of nccl.h and cuda_runtime_api.h, which keep
// them stable across versions.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>

extern "C" {

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow* ncclWindow_t;
typedef void* cudaStream_t;

#define TL_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[TL_NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;

typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
} ncclDataType_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

// The prefix of ncclConfig_t that NCCL 2.17 defined. NCCL copies `size` bytes of it and fills the
// fields a config of `version` does not have with its defaults, so this prefix is valid for every
// later version.
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
} tlNcclConfig;

#define TL_NCCL_CONFIG_MAGIC 0xcafebeefu
#define TL_NCCL_CONFIG_UNDEF_INT INT_MIN
#define TL_NCCL_VERSION(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))

// ncclCommWindowRegister's flags (2.27).
#define TL_NCCL_WIN_DEFAULT 0x00
#define TL_NCCL_WIN_COLL_SYMMETRIC 0x01

typedef ncclResult_t (*ncclGetVersion_fn)(int* version);
typedef ncclResult_t (*ncclGetUniqueId_fn)(ncclUniqueId* uniqueId);
typedef const char* (*ncclGetErrorString_fn)(ncclResult_t result);
typedef const char* (*ncclGetLastError_fn)(ncclComm_t comm);
typedef ncclResult_t (*ncclCommInitRankConfig_fn)(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, tlNcclConfig* config);
typedef ncclResult_t (*ncclCommGetAsyncError_fn)(ncclComm_t comm, ncclResult_t* asyncError);
typedef ncclResult_t (*ncclCommFinalize_fn)(ncclComm_t comm);
typedef ncclResult_t (*ncclCommDestroy_fn)(ncclComm_t comm);
typedef ncclResult_t (*ncclCommAbort_fn)(ncclComm_t comm);
typedef ncclResult_t (*ncclGroupStart_fn)();
typedef ncclResult_t (*ncclGroupEnd_fn)();
typedef ncclResult_t (*ncclSend_fn)(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream);
typedef ncclResult_t (*ncclRecv_fn)(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream);
typedef ncclResult_t (*ncclAllReduce_fn)(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
typedef ncclResult_t (*ncclBroadcast_fn)(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
// 2.19
typedef ncclResult_t (*ncclCommRegister_fn)(const ncclComm_t comm, void* buff, size_t size, void** handle);
typedef ncclResult_t (*ncclCommDeregister_fn)(const ncclComm_t comm, void* handle);
typedef ncclResult_t (*ncclMemAlloc_fn)(void** ptr, size_t size);
typedef ncclResult_t (*ncclMemFree_fn)(void* ptr);
// 2.27
typedef ncclResult_t (*ncclCommWindowRegister_fn)(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
typedef ncclResult_t (*ncclCommWindowDeregister_fn)(ncclComm_t comm, ncclWindow_t win);

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorNotReady = 600 };
enum { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
#define TL_CUDA_STREAM_NON_BLOCKING 0x01

typedef cudaError_t (*cudaGetDeviceCount_fn)(int* count);
typedef cudaError_t (*cudaSetDevice_fn)(int device);
typedef cudaError_t (*cudaDriverGetVersion_fn)(int* version);
typedef cudaError_t (*cudaRuntimeGetVersion_fn)(int* version);
typedef const char* (*cudaGetErrorString_fn)(cudaError_t error);
typedef cudaError_t (*cudaMalloc_fn)(void** ptr, size_t size);
typedef cudaError_t (*cudaFree_fn)(void* ptr);
typedef cudaError_t (*cudaMemcpy_fn)(void* dst, const void* src, size_t count, int kind);
typedef cudaError_t (*cudaMemset_fn)(void* ptr, int value, size_t count);
typedef cudaError_t (*cudaStreamCreateWithFlags_fn)(cudaStream_t* stream, unsigned int flags);
typedef cudaError_t (*cudaStreamQuery_fn)(cudaStream_t stream);
typedef cudaError_t (*cudaStreamDestroy_fn)(cudaStream_t stream);

}  // extern "C"
