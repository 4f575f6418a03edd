#include "BusGuard.h"

#include <pthread.h>

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>

namespace tensorlane::symmetric {

namespace {

struct Guard {
  sigjmp_buf jump;
  const uint8_t* begin;
  const uint8_t* end;
};

// Initial-exec: the handler must not make the dynamic TLS allocation (malloc) that a first access
// from a thread of a dlopen'ed library may make.
__attribute__((tls_model("initial-exec"))) thread_local Guard* active = nullptr;

std::once_flag installing;
// The action in place before ours, read once before ours is installed; ours stays for good.
struct sigaction previous;
// Set once a previous handler with SA_RESETHAND has had its one signal: the default action since.
std::atomic<bool> previousSpent{false};

/** An access that faults again if retried, as opposed to a signal a process sent or an asynchronous memory error. */
bool synchronous(int code) { return code == BUS_ADRALN || code == BUS_ADRERR || code == BUS_OBJERR || code == BUS_MCEERR_AR; }

void dieOf(int signal) {
  std::signal(signal, SIG_DFL);
  // Blocked while this handler runs: delivered, and fatal, as it returns.
  std::raise(signal);
}

/**
 * A fault inside a guarded copy's source jumps back out of the copy. Any other SIGBUS gets what the
 * action before ours would have done: its handler, called with its mask added (and once only, with
 * SA_RESETHAND), ignored where it was ignored (a fault, which would only repeat, kills), else the
 * default, which kills. Ours is never taken out again: another thread may be inside a guarded copy.
 */
void onBus(int signal, siginfo_t* info, void* context) {
  const bool fault = synchronous(info->si_code);
  Guard* guard = active;
  const auto* address = static_cast<const uint8_t*>(info->si_addr);
  if (fault && guard != nullptr && address >= guard->begin && address < guard->end) siglongjmp(guard->jump, 1);
  const bool spent = (previous.sa_flags & SA_RESETHAND) != 0 && previousSpent.exchange(true);
  if (spent || previous.sa_handler == SIG_DFL) return dieOf(signal);
  if (previous.sa_handler == SIG_IGN) {
    if (fault) dieOf(signal);
    return;
  }
  sigset_t saved;
  pthread_sigmask(SIG_BLOCK, &previous.sa_mask, &saved);
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    previous.sa_sigaction(signal, info, context);
  } else {
    previous.sa_handler(signal);
  }
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
}

/**
 * Puts onBus in place once. Not again if a library installed later replaces it: that library's
 * handler may pass SIGBUS on to ours (then guarded copies stay guarded), and putting ours back over
 * it could send a signal around the two for ever.
 */
void install() {
  std::call_once(installing, [] {
    sigaction(SIGBUS, nullptr, &previous);
    struct sigaction handler = {};
    handler.sa_sigaction = onBus;
    handler.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&handler.sa_mask);
    sigaction(SIGBUS, &handler, nullptr);
  });
}

}  // namespace

bool copyGuarded(uint8_t* target, const uint8_t* source, size_t length) {
  if (length == 0) return true;
  install();
  Guard guard{{}, source, source + length};
  // The signal mask is saved, so that SIGBUS, blocked while its handler runs, is unblocked again
  // when the handler jumps back here.
  if (sigsetjmp(guard.jump, 1) != 0) {
    active = nullptr;
    return false;
  }
  active = &guard;
  // The handler reads `active`: the compiler must not move the stores across the copy.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(target, source, length);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  active = nullptr;
  return true;
}

}  // namespace tensorlane::symmetric
