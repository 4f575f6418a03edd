/*
 * TEST DOUBLE of the CUDA driver library (libcuda.so.1), for the nvshmem backend's device selection
 * on machines without a GPU: it records the calls, one per line, in $FAKE_CUDA_LOG (with the pid),
 * reports $FAKE_CUDA_DEVICES devices (default 2), and cuInit returns $FAKE_CUDA_INIT_RESULT (default 0).
 * Its "contexts" are the ordinals plus one, the current one per process; nothing touches a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int envInt(const char* name, int fallback) {
  const char* raw = getenv(name);
  return raw != NULL && *raw != '\0' ? atoi(raw) : fallback;
}

static void record(const char* call, long argument) {
  const char* path = getenv("FAKE_CUDA_LOG");
  if (path == NULL) return;
  FILE* log = fopen(path, "a");
  if (log == NULL) return;
  fprintf(log, "%d %s %ld\n", (int)getpid(), call, argument);
  fclose(log);
}

int cuInit(unsigned int flags) {
  record("cuInit", (long)flags);
  return envInt("FAKE_CUDA_INIT_RESULT", 0);
}

int cuDeviceGetCount(int* count) {
  *count = envInt("FAKE_CUDA_DEVICES", 2);
  record("cuDeviceGetCount", *count);
  return 0;
}

int cuDeviceGet(int* device, int ordinal) {
  record("cuDeviceGet", ordinal);
  if (ordinal < 0 || ordinal >= envInt("FAKE_CUDA_DEVICES", 2)) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *device = ordinal;
  return 0;
}

int cuDevicePrimaryCtxRetain(void** context, int device) {
  record("cuDevicePrimaryCtxRetain", device);
  *context = (void*)(long)(device + 1);
  return 0;
}

static long current = 0;

int cuCtxSetCurrent(void* context) {
  record("cuCtxSetCurrent", (long)context);
  current = (long)context;
  return 0;
}

int cuCtxGetDevice(int* device) {
  if (current == 0) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
  *device = (int)(current - 1);
  record("cuCtxGetDevice", *device);
  return 0;
}

int cuGetErrorName(int result, const char** name) {
  switch (result) {
    case 100: *name = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 101: *name = "CUDA_ERROR_INVALID_DEVICE"; return 0;
    default: return 1; /* CUDA_ERROR_INVALID_VALUE */
  }
}
