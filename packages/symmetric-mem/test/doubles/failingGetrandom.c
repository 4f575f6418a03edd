/*
 * Test double (LD_PRELOAD): getrandom(2) that fails with EIO while TENSORLANE_TEST_FAIL_GETRANDOM
 * is set, and is the real one otherwise. It lets test/addon.test.ts make the segment token fail,
 * which the kernel does not do on request.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/types.h>

typedef ssize_t (*GetrandomFn)(void*, size_t, unsigned int);

ssize_t getrandom(void* buffer, size_t length, unsigned int flags) {
  if (getenv("TENSORLANE_TEST_FAIL_GETRANDOM") != NULL) {
    errno = EIO;
    return -1;
  }
  GetrandomFn real = (GetrandomFn)dlsym(RTLD_NEXT, "getrandom");
  return real(buffer, length, flags);
}
