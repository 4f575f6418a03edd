#include "Device.h"

#include "PairGuard.h"

#include <tensorlane/Settings.h>

#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/loop.h>

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

namespace tensorlane::gloo {

namespace {

constexpr const char* kCpusVariable = "TENSORLANE_GLOO_DEVICE_CPUS";
// The value that leaves the device's thread on every CPU the process may use.
constexpr const char* kAnywhere = "all";
constexpr const char* kCpusAccepted = "a list of CPUs (like 1 or 0,2-3), or all";

// A set as the kernel lists CPUs ("0-1,4").
std::string describe(const cpu_set_t& set) {
  std::ostringstream out;
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) last++;
    if (out.tellp() > 0) out << ",";
    out << cpu;
    if (last > cpu) out << "-" << last;
    cpu = last;
  }
  return out.str();
}

// A list such as "1" or "0,2-3"; Failure(Setting) for anything else.
cpu_set_t parseCpus(const std::string& list) {
  const auto fail = [&]() -> cpu_set_t { throw invalidSetting(kCpusVariable, list, kCpusAccepted); };
  cpu_set_t set;
  CPU_ZERO(&set);
  std::istringstream items(list);
  std::string item;
  bool any = false;
  while (std::getline(items, item, ',')) {
    const size_t dash = item.find('-');
    const std::string first = item.substr(0, dash);
    const std::string last = dash == std::string::npos ? first : item.substr(dash + 1);
    const auto number = [&](const std::string& text) {
      const std::optional<int64_t> value = parseInteger(text, 0, CPU_SETSIZE - 1);
      if (!value.has_value()) fail();
      return static_cast<int>(*value);
    };
    const int from = number(first), to = number(last);
    if (from > to) fail();
    for (int cpu = from; cpu <= to; cpu++) CPU_SET(cpu, &set);
    any = true;
  }
  if (!any) fail();
  return set;
}

// The CPUs of `own` at positions rank, rank + size, rank + 2 * size...: disjoint shares, one per
// rank. None for a group of one, or of more ranks than `own` has CPUs (shares would overlap).
std::optional<cpu_set_t> shareOf(const cpu_set_t& own, RankShare share) {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (CPU_ISSET(cpu, &own)) cpus.push_back(cpu);
  }
  if (share.size < 2 || static_cast<size_t>(share.size) > cpus.size()) return std::nullopt;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (size_t i = share.rank; i < cpus.size(); i += share.size) CPU_SET(cpus[i], &set);
  return set;
}

// The device's event-loop thread moves every byte of the process's gloo transfers. It inherits the
// CPUs of the thread that creates it, so the creating thread takes the device's CPUs (configured,
// or the rank's share) for the creation and then gets its own back. A share is only for speed: when
// this thread cannot take it, the device is created where the thread runs.
template <typename Create>
std::shared_ptr<::gloo::transport::Device> createOnCpus(std::optional<RankShare> share, Create create) {
  const std::optional<std::string> configured = setting(kCpusVariable);
  if (!configured.has_value() ? !share.has_value() : *configured == kAnywhere) return create();
  cpu_set_t own;
  if (pthread_getaffinity_np(pthread_self(), sizeof(own), &own) != 0) {
    if (!configured.has_value()) return create();
    throw Failure(FailureCode::Io, std::string("cannot read this thread's CPUs to apply ") + kCpusVariable);
  }
  const std::optional<cpu_set_t> wanted = configured.has_value() ? std::optional<cpu_set_t>(parseCpus(*configured)) : shareOf(own, *share);
  if (!wanted.has_value()) return create();
  const int refused = pthread_setaffinity_np(pthread_self(), sizeof(*wanted), &*wanted);
  if (refused != 0 && !configured.has_value()) return create();
  if (refused == EINVAL) throw invalidSetting(kCpusVariable, *configured, "CPUs this process may run on (" + describe(own) + "), or all");
  if (refused != 0) {
    throw Failure(FailureCode::Io, std::string("cannot keep the gloo device's thread on ") + kCpusVariable + "=\"" + *configured +
                                         "\": " + std::strerror(refused));
  }
  // The creating thread gets its own CPUs back however the creation ends.
  struct Restore {
    const cpu_set_t& own;
    ~Restore() { pthread_setaffinity_np(pthread_self(), sizeof(own), &own); }
  } restore{own};
  return create();
}

// In the device's loop: a semaphore eventfd, readable while any Ticking counts on it (level-triggered,
// so the loop's wait returns at once for as long as it is). -1 where the loop would not take it.
std::atomic<int> tickerFd{-1};

struct Ticker final : ::gloo::transport::tcp::Handler {
  // Never reads the eventfd: the Tickings that wrote to it read their counts back.
  void handleEvents(int) override {}
};

void registerTicker(::gloo::transport::Device& device) {
  auto* tcp = dynamic_cast<::gloo::transport::tcp::Device*>(&device);
  if (tcp == nullptr) return;
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
  if (fd < 0) return;
  // Never destroyed, as the device: its loop may call it until the process ends.
  static Ticker* ticker = new Ticker();
  try {
    tcp->registerDescriptor(fd, EPOLLIN, ticker);
    tickerFd.store(fd);
  } catch (const std::exception&) {
    // Closing pairs then waits for the loop's own rounds, as gloo does.
    ::close(fd);
  }
}

}  // namespace

Device::Ticking::Ticking() : fd_(tickerFd.load()) {
  const uint64_t one = 1;
  if (fd_ >= 0 && write(fd_, &one, sizeof(one)) != sizeof(one)) fd_ = -1;
}

Device::Ticking::~Ticking() {
  uint64_t count = 0;
  if (fd_ >= 0) [[maybe_unused]] const ssize_t read = ::read(fd_, &count, sizeof(count));
}

std::string Device::host() {
  return setting("TENSORLANE_GLOO_HOST").value_or("127.0.0.1");
}

std::shared_ptr<::gloo::transport::Device> Device::shared(std::optional<RankShare> share) {
  static std::mutex mutex;
  static std::shared_ptr<::gloo::transport::Device> device;
  std::lock_guard<std::mutex> lock(mutex);
  if (device == nullptr) {
    // Before the device's loop thread exists: it calls through the imports the guard redirects.
    PairGuard::install();
    ::gloo::transport::tcp::attr attr;
    attr.hostname = host();
    attr.ai_family = AF_UNSPEC;
    try {
      device = createOnCpus(share, [&] { return ::gloo::transport::tcp::CreateDevice(attr); });
      registerTicker(*device);
    } catch (const Failure&) {
      throw;
    } catch (const std::exception& e) {
      throw Failure(FailureCode::Io, "cannot open a gloo TCP device on " + attr.hostname +
                                           " (set TENSORLANE_GLOO_HOST to an address of this host): " + e.what());
    }
  }
  return device;
}

}  // namespace tensorlane::gloo
