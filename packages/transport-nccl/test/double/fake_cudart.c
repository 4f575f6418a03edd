/*
 * TEST DOUBLE of the CUDA runtime (libcudart.so.12) — not CUDA. Built by the tests and loaded
 * through TENSORLANE_CUDART_LIBRARY: "device memory" is host memory, copies are memcpy, streams
 * are always idle, and $FAKE_CUDA_DEVICES devices exist (default 1), so that the allocator and
 * pool code paths run on a machine without a GPU.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInvalidDevice = 101 };

static int devices(void) {
  const char* n = getenv("FAKE_CUDA_DEVICES");
  return n != NULL ? atoi(n) : 1;
}

int cudaGetDeviceCount(int* count) {
  *count = devices();
  return cudaSuccess;
}

int cudaSetDevice(int device) { return device >= 0 && device < devices() ? cudaSuccess : cudaErrorInvalidDevice; }

int cudaDriverGetVersion(int* version) {
  *version = 12090;
  return cudaSuccess;
}

int cudaRuntimeGetVersion(int* version) {
  *version = 12090;
  return cudaSuccess;
}

const char* cudaGetErrorString(int error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (test double)";
    case cudaErrorMemoryAllocation: return "out of memory (test double)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (test double)";
  }
  return "unknown error (test double)";
}

int cudaMalloc(void** ptr, size_t size) {
  *ptr = aligned_alloc(256, (size + 255) / 256 * 256 + 256);
  return *ptr == NULL ? cudaErrorMemoryAllocation : cudaSuccess;
}

int cudaFree(void* ptr) {
  free(ptr);
  return cudaSuccess;
}

int cudaMemcpy(void* dst, const void* src, size_t count, int kind) {
  (void)kind;
  memcpy(dst, src, count);
  return cudaSuccess;
}

int cudaMemset(void* ptr, int value, size_t count) {
  memset(ptr, value, count);
  return cudaSuccess;
}

int cudaStreamCreateWithFlags(void** stream, unsigned int flags) {
  (void)flags;
  *stream = malloc(1);
  return cudaSuccess;
}

int cudaStreamQuery(void* stream) {
  (void)stream;
  return cudaSuccess;
}

int cudaStreamDestroy(void* stream) {
  free(stream);
  return cudaSuccess;
}
