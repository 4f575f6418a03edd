#include "BusGuard.h"

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

// The action that was in place before ours, published whole: a reinstall writes the other slot.
struct sigaction previousSlots[2];
std::atomic<int> previousSlot{0};
std::mutex installing;

void onBus(int signal, siginfo_t* info, void*);

bool ours(const struct sigaction& action) { return (action.sa_flags & SA_SIGINFO) != 0 && action.sa_sigaction == onBus; }

/**
 * A SIGBUS that is not a guarded copy's goes to the action that was there before ours, delivered by
 * the kernel with that action's own flags and mask: the action is put back, and the signal comes
 * again (a fault repeats as the access does; one a process sent is raised once more, pending until
 * this handler returns). Called by another handler that chains to ours (installed after it), ours is
 * not in place: the default action, rather than a loop between the two.
 */
void onBus(int signal, siginfo_t* info, void*) {
  Guard* guard = active;
  const bool fault = info->si_code > 0;  // raised by the kernel for an access, not sent by a process
  const auto* address = static_cast<const uint8_t*>(info->si_addr);
  if (fault && guard != nullptr && address >= guard->begin && address < guard->end) siglongjmp(guard->jump, 1);
  struct sigaction current;
  sigaction(signal, nullptr, &current);
  if (ours(current)) {
    sigaction(signal, &previousSlots[previousSlot.load(std::memory_order_acquire)], nullptr);
  } else {
    std::signal(signal, SIG_DFL);
  }
  if (!fault) std::raise(signal);
}

/** Puts onBus in place, keeping what was there: a library loaded later (UCX installs its own) may have replaced it. */
void install() {
  struct sigaction current;
  sigaction(SIGBUS, nullptr, &current);
  if (ours(current)) return;
  std::lock_guard<std::mutex> lock(installing);
  sigaction(SIGBUS, nullptr, &current);
  if (ours(current)) return;
  const int slot = 1 - previousSlot.load(std::memory_order_relaxed);
  previousSlots[slot] = current;
  previousSlot.store(slot, std::memory_order_release);
  struct sigaction handler = {};
  handler.sa_sigaction = onBus;
  handler.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&handler.sa_mask);
  sigaction(SIGBUS, &handler, nullptr);
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
