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

static int fails(off_t length) {
  const char* above = getenv("TENSORLANE_TEST_FAIL_FALLOCATE_ABOVE");
  return above != NULL && length > strtoll(above, NULL, 10);
}

int posix_fallocate(int fd, off_t offset, off_t length) {
  if (fails(length)) return EIO;
  FallocateFn real = (FallocateFn)dlsym(RTLD_NEXT, "posix_fallocate");
  return real(fd, offset, length);
}

/* The name an addon built with _FILE_OFFSET_BITS=64 calls; off_t is 64 bits on x86-64 either way. */
int posix_fallocate64(int fd, off_t offset, off_t length) {
  if (fails(length)) return EIO;
  FallocateFn real = (FallocateFn)dlsym(RTLD_NEXT, "posix_fallocate64");
  return real(fd, offset, length);
}
