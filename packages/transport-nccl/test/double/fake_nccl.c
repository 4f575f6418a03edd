/*
 * TEST DOUBLE of libnccl.so.2 — not NCCL. Built by the tests (test/double/build.ts) and loaded
 * through TENSORLANE_NCCL_LIBRARY, it exports the symbols the addon dlopens and records every call
 * in the file named by $FAKE_NCCL_LOG, one line each, so that tests can check what the transport
 * and the pools asked of NCCL (order, sizes, handles) on a machine without a GPU. It moves no data.
 * With FAKE_NCCL_COLLECTIVE=1, window registration and deregistration are collective, as in NCCL:
 * a communicator's call completes (ncclCommGetAsyncError stops reporting ncclInProgress) only once
 * every rank of the communicator made its call of the same turn; a rank that fails its call never
 * arrives, and the others wait. Ranks may live in several processes: each arrival appends a record
 * (the call and the window's size) to a file named by the unique id and the turn, in the folder
 * $FAKE_NCCL_TURNS, which the test makes and removes (unique ids name the process and the time). Ranks whose calls
 * of one turn differ fail it (ncclCommGetAsyncError reports ncclInvalidUsage), where NCCL would
 * hang or corrupt: collective calls must come in the same order everywhere. Window handles are
 * opaque, and odd ranks' are complemented so that their order differs between ranks, as NCCL's may.
 * Without it, each rank's window call completes alone.
 *
 * Failure injection (read at each call, so tests can change it between calls):
 *   FAKE_NCCL_FAIL=<function>:<rank>:<after>   the call of <function> on <rank> (-1: any rank)
 *                                               fails with ncclSystemError once <after> such
 *                                               calls have succeeded (ncclMemAlloc has no
 *                                               rank: only <rank> -1 applies to it)
 *   FAKE_NCCL_HANG=<function>                   ncclCommGetAsyncError reports ncclInProgress for
 *                                               ever after a call of <function> (until abort)
 *   FAKE_NCCL_VERSION=<code>                    what ncclGetVersion reports (default 22809)
 *   FAKE_NCCL_ABORT_MS=<ms>                     ncclCommAbort takes this long (as NCCL's does while
 *                                               its kernels and proxy threads stop)
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  char internal[128];
} ncclUniqueId;

typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
} fakeConfig;

struct ncclComm {
  char id[128];
  int rank;
  int nranks;
  int serial;
  int collectives; /* window calls this rank made so far */
  int waiting;     /* turn of the collective this rank waits for the others in, or 0 */
  int mismatched;  /* the ranks' calls of a turn differed */
  int pending; /* ncclCommGetAsyncError reports ncclInProgress this many more times */
  int hung;
  int aborted;
};

enum { ncclSuccess = 0, ncclSystemError = 2, ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclInProgress = 7 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int serials = 0;
static char lastError[256] = "";

static void record(const char* format, ...) {
  const char* path = getenv("FAKE_NCCL_LOG");
  if (path == NULL || path[0] == '\0') return;
  pthread_mutex_lock(&lock);
  FILE* f = fopen(path, "a");
  if (f != NULL) {
    va_list args;
    va_start(args, format);
    vfprintf(f, format, args);
    va_end(args);
    fputc('\n', f);
    fclose(f);
  }
  pthread_mutex_unlock(&lock);
}

/* Counts calls per function and rank for FAKE_NCCL_FAIL; returns 1 when this call must fail. */
static int injected(const char* fn, int rank) {
  static char counted[64] = "";
  static int calls = 0;
  const char* spec = getenv("FAKE_NCCL_FAIL");
  if (spec == NULL || spec[0] == '\0') return 0;
  char name[64];
  int failRank = -1, after = 0;
  if (sscanf(spec, "%63[^:]:%d:%d", name, &failRank, &after) < 1) return 0;
  if (strcmp(name, fn) != 0 || (failRank >= 0 && failRank != rank)) return 0;
  pthread_mutex_lock(&lock);
  if (strcmp(counted, spec) != 0) {
    snprintf(counted, sizeof(counted), "%s", spec);
    calls = 0;
  }
  int fail = calls >= after;
  if (!fail) calls++;
  if (fail) snprintf(lastError, sizeof(lastError), "%s failed on rank %d: injected by the test double", fn, rank);
  pthread_mutex_unlock(&lock);
  return fail;
}

/* The file counting arrivals at one turn of one communicator's collective window calls. */
static void turnPath(const struct ncclComm* comm, int turn, char* path, size_t size) {
  const char* dir = getenv("FAKE_NCCL_TURNS");
  if (dir == NULL || dir[0] == '\0') {
    fprintf(stderr, "fake_nccl: FAKE_NCCL_COLLECTIVE=1 needs FAKE_NCCL_TURNS, a folder for the turns' records\n");
    abort();
  }
  mkdir(dir, 0700);
  snprintf(path, size, "%s/%s-%d", dir, comm->id, turn);
}

enum { TURN_RECORD = 64 };

static void arrive(struct ncclComm* comm, const char* call, size_t size) {
  const char* collective = getenv("FAKE_NCCL_COLLECTIVE");
  if (collective == NULL || strcmp(collective, "1") != 0) return;
  char path[768];
  char entry[TURN_RECORD] = {0};
  snprintf(entry, sizeof(entry), "%s size=%zu", call, size);
  comm->waiting = ++comm->collectives;
  turnPath(comm, comm->waiting, path, sizeof(path));
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd < 0 || write(fd, entry, sizeof(entry)) != sizeof(entry)) abort();
  close(fd);
}

/* Compares the records of a complete turn; a difference fails this rank's call. */
static void checkTurn(struct ncclComm* comm, const char* path) {
  char first[TURN_RECORD], other[TURN_RECORD];
  FILE* f = fopen(path, "r");
  if (f == NULL || fread(first, 1, sizeof(first), f) != sizeof(first)) abort();
  for (int i = 1; i < comm->nranks; i++) {
    if (fread(other, 1, sizeof(other), f) != sizeof(other)) abort();
    if (memcmp(first, other, sizeof(first)) != 0) {
      comm->mismatched = 1;
      snprintf(lastError, sizeof(lastError), "collective window calls of turn %d differ across ranks (%s, %s): injected by the test double",
               comm->waiting, first, other);
    }
  }
  fclose(f);
}

/* 1 while this rank waits in a collective call for the other ranks. */
static int waitingForPeers(struct ncclComm* comm) {
  if (comm->waiting == 0) return 0;
  char path[768];
  struct stat st;
  turnPath(comm, comm->waiting, path, sizeof(path));
  if (stat(path, &st) != 0 || st.st_size < (off_t)comm->nranks * TURN_RECORD) return 1;
  checkTurn(comm, path);
  comm->waiting = 0;
  return 0;
}

static void maybeHang(struct ncclComm* comm, const char* fn) {
  const char* hang = getenv("FAKE_NCCL_HANG");
  if (hang != NULL && strcmp(hang, fn) == 0) comm->hung = 1;
}

int ncclGetVersion(int* version) {
  const char* v = getenv("FAKE_NCCL_VERSION");
  *version = v != NULL ? atoi(v) : 22809;
  return ncclSuccess;
}

int ncclGetUniqueId(ncclUniqueId* id) {
  memset(id, 0, sizeof(*id));
  pthread_mutex_lock(&lock);
  int serial = ++serials;
  pthread_mutex_unlock(&lock);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  snprintf(id->internal, sizeof(id->internal), "fake-nccl-id-%d-%lld%09ld-%d", (int)getpid(), (long long)now.tv_sec, now.tv_nsec, serial);
  record("ncclGetUniqueId id=%s", id->internal);
  return ncclSuccess;
}

const char* ncclGetErrorString(int result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "unhandled system error (test double)";
    case ncclInvalidArgument: return "invalid argument (test double)";
    case ncclInvalidUsage: return "invalid usage (test double)";
    case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result (test double)";
}

const char* ncclGetLastError(struct ncclComm* comm) {
  (void)comm;
  return lastError;
}

int ncclCommInitRankConfig(struct ncclComm** out, int nranks, ncclUniqueId id, int rank, fakeConfig* config) {
  if (config == NULL || config->magic != 0xcafebeefu || config->size < sizeof(fakeConfig)) return ncclInvalidArgument;
  record("ncclCommInitRankConfig rank=%d nranks=%d id=%s blocking=%d", rank, nranks, id.internal, config->blocking);
  if (injected("ncclCommInitRankConfig", rank)) return ncclSystemError;
  struct ncclComm* comm = calloc(1, sizeof(*comm));
  memcpy(comm->id, id.internal, sizeof(comm->id));
  comm->rank = rank;
  comm->nranks = nranks;
  pthread_mutex_lock(&lock);
  comm->serial = ++serials;
  pthread_mutex_unlock(&lock);
  /* Non-blocking init: report "in progress" a few times, as NCCL does while it connects. */
  comm->pending = config->blocking == 0 ? 3 : 0;
  maybeHang(comm, "ncclCommInitRankConfig");
  *out = comm;
  return config->blocking == 0 ? ncclInProgress : ncclSuccess;
}

int ncclCommGetAsyncError(struct ncclComm* comm, int* state) {
  if (comm->aborted) return ncclInvalidUsage;
  if (comm->hung) {
    *state = ncclInProgress;
    return ncclSuccess;
  }
  if (comm->pending > 0) {
    comm->pending--;
    *state = ncclInProgress;
    return ncclSuccess;
  }
  *state = waitingForPeers(comm) ? ncclInProgress : comm->mismatched ? ncclInvalidUsage : ncclSuccess;
  return ncclSuccess;
}

int ncclCommFinalize(struct ncclComm* comm) {
  record("ncclCommFinalize rank=%d", comm->rank);
  comm->pending = 2;
  return ncclInProgress;
}

int ncclCommDestroy(struct ncclComm* comm) {
  record("ncclCommDestroy rank=%d", comm->rank);
  free(comm);
  return ncclSuccess;
}

int ncclCommAbort(struct ncclComm* comm) {
  const char* slow = getenv("FAKE_NCCL_ABORT_MS");
  if (slow != NULL) usleep((useconds_t)atoi(slow) * 1000);
  record("ncclCommAbort rank=%d", comm->rank);
  free(comm);
  return ncclSuccess;
}

int ncclGroupStart(void) {
  record("ncclGroupStart");
  return ncclSuccess;
}

int ncclGroupEnd(void) {
  record("ncclGroupEnd");
  return ncclSuccess;
}

int ncclSend(const void* buff, size_t count, int dtype, int peer, struct ncclComm* comm, void* stream) {
  (void)buff;
  (void)stream;
  record("ncclSend rank=%d peer=%d count=%zu dtype=%d", comm->rank, peer, count, dtype);
  if (injected("ncclSend", comm->rank)) return ncclSystemError;
  maybeHang(comm, "ncclSend");
  return ncclSuccess;
}

int ncclRecv(void* buff, size_t count, int dtype, int peer, struct ncclComm* comm, void* stream) {
  (void)buff;
  (void)stream;
  record("ncclRecv rank=%d peer=%d count=%zu dtype=%d", comm->rank, peer, count, dtype);
  maybeHang(comm, "ncclRecv");
  return ncclSuccess;
}

int ncclAllReduce(const void* send, void* recv, size_t count, int dtype, int op, struct ncclComm* comm, void* stream) {
  (void)stream;
  record("ncclAllReduce rank=%d count=%zu dtype=%d op=%d inplace=%d", comm->rank, count, dtype, op, send == recv);
  return ncclSuccess;
}

int ncclBroadcast(const void* send, void* recv, size_t count, int dtype, int root, struct ncclComm* comm, void* stream) {
  (void)stream;
  record("ncclBroadcast rank=%d count=%zu dtype=%d root=%d inplace=%d", comm->rank, count, dtype, root, send == recv);
  return ncclSuccess;
}

int ncclCommRegister(struct ncclComm* comm, void* buff, size_t size, void** handle) {
  if (injected("ncclCommRegister", comm->rank)) {
    record("ncclCommRegister rank=%d ptr=%p size=%zu failed", comm->rank, buff, size);
    return ncclSystemError;
  }
  *handle = malloc(1);
  record("ncclCommRegister rank=%d ptr=%p size=%zu handle=%p", comm->rank, buff, size, *handle);
  maybeHang(comm, "ncclCommRegister");
  return ncclSuccess;
}

int ncclCommDeregister(struct ncclComm* comm, void* handle) {
  record("ncclCommDeregister rank=%d handle=%p", comm->rank, handle);
  if (injected("ncclCommDeregister", comm->rank)) return ncclSystemError;
  free(handle);
  return ncclSuccess;
}

/* A window's handle from its allocation and back (its own inverse): odd ranks complement it. */
static void* windowHandle(const struct ncclComm* comm, void* p) {
  return comm->rank % 2 == 0 ? p : (void*)~(uintptr_t)p;
}

int ncclCommWindowRegister(struct ncclComm* comm, void* buff, size_t size, void** window, int flags) {
  if (injected("ncclCommWindowRegister", comm->rank)) {
    record("ncclCommWindowRegister rank=%d ptr=%p size=%zu failed", comm->rank, buff, size);
    return ncclSystemError;
  }
  size_t* bytes = malloc(sizeof(size_t));
  *bytes = size;
  *window = windowHandle(comm, bytes);
  record("ncclCommWindowRegister rank=%d ptr=%p size=%zu window=%p flags=%d", comm->rank, buff, size, *window, flags);
  arrive(comm, "ncclCommWindowRegister", size);
  return ncclSuccess;
}

int ncclCommWindowDeregister(struct ncclComm* comm, void* window) {
  size_t* bytes = windowHandle(comm, window);
  record("ncclCommWindowDeregister rank=%d window=%p size=%zu", comm->rank, window, *bytes);
  arrive(comm, "ncclCommWindowDeregister", *bytes);
  free(bytes);
  return ncclSuccess;
}

int ncclMemAlloc(void** ptr, size_t size) {
  /* No communicator, no rank: only FAKE_NCCL_FAIL=ncclMemAlloc:-1:<after> (in that process) applies. */
  if (injected("ncclMemAlloc", -1)) {
    record("ncclMemAlloc size=%zu failed", size);
    return ncclSystemError;
  }
  *ptr = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  if (*ptr == NULL) return ncclSystemError;
  memset(*ptr, 0, size);
  record("ncclMemAlloc ptr=%p size=%zu", *ptr, size);
  return ncclSuccess;
}

int ncclMemFree(void* ptr) {
  record("ncclMemFree ptr=%p", ptr);
  free(ptr);
  return ncclSuccess;
}
