/*
 * Test double (LD_PRELOAD): posix_fallocate(3) that fails with EIO for a range longer than
 * TENSORLANE_TEST_FAIL_FALLOCATE_ABOVE bytes, and is the real one otherwise. It lets
 * test/symmetric.test.ts make one rank's reservation fail other than for want of room, which
 * tmpfs does not do on request.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

typedef int (*FallocateFn)(int, off_t, off_t);

int posix_fallocate(int fd, off_t offset, off_t length) {
  const char* above = getenv("TENSORLANE_TEST_FAIL_FALLOCATE_ABOVE");
  if (above != NULL && length > strtoll(above, NULL, 10)) return EIO;
  FallocateFn real = (FallocateFn)dlsym(RTLD_NEXT, "posix_fallocate");
  return real(fd, offset, length);
}
