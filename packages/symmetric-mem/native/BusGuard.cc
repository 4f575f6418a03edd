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

thread_local Guard* active = nullptr;

std::mutex installing;
struct sigaction previous;

void onBus(int signal, siginfo_t* info, void* context) {
  Guard* guard = active;
  const auto* address = static_cast<const uint8_t*>(info->si_addr);
  if (guard != nullptr && address >= guard->begin && address < guard->end) siglongjmp(guard->jump, 1);
  // Not ours: what was there before handles it; the default action kills the process as the fault
  // repeats once this handler returns.
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(signal, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(signal);
  } else {
    std::signal(SIGBUS, SIG_DFL);
  }
}

/** Puts onBus in place, keeping what was there: a library loaded later (UCX installs its own) may have replaced it. */
void install() {
  struct sigaction current;
  sigaction(SIGBUS, nullptr, &current);
  if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == onBus) return;
  std::lock_guard<std::mutex> lock(installing);
  sigaction(SIGBUS, nullptr, &current);
  if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == onBus) return;
  struct sigaction ours = {};
  ours.sa_sigaction = onBus;
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&ours.sa_mask);
  previous = current;
  sigaction(SIGBUS, &ours, nullptr);
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
