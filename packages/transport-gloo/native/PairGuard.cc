#include "PairGuard.h"

#include "ImportSlots.h"

#include <gloo/transport/tcp/device.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

namespace tensorlane::gloo {

namespace {

using AcceptFunction = int (*)(int, sockaddr*, socklen_t*);
using ConnectFunction = int (*)(int, const sockaddr*, socklen_t);
using EpollCtlFunction = int (*)(int, int, int, epoll_event*);

// What libgloo called before install() (libc's), set once before gloo's loop thread exists.
AcceptFunction realAccept = nullptr;
ConnectFunction realConnect = nullptr;
EpollCtlFunction realEpollCtl = nullptr;

// What each end sends first: magic "TLGP", version, then its proof (little endian).
constexpr uint32_t kHelloMagic = 0x50474c54;
constexpr uint32_t kHelloVersion = 1;
constexpr size_t kHelloBytes = 8 + 32;
using Hello = std::array<uint8_t, kHelloBytes>;

// Connections the listening side keeps while their proof is incomplete; the oldest goes first, so a
// crowd of strangers that connect and wait cannot keep the peer (which proves at once) out.
constexpr size_t kMaxCandidates = 16;
// gloo listens with a backlog of one: strangers queued there would make the peer's connect wait
// for the kernel's SYN retries.
constexpr int kBacklog = 64;

thread_local std::shared_ptr<PairGuard::Listener>* capturing = nullptr;
thread_local PairGuard::Handshake* handshaking = nullptr;

}  // namespace

class PairGuard::Listener {
 public:
  Listener(int socket, int wake) : socket(socket), wake(wake) {}
  ~Listener() {
    ::close(socket);
    ::close(wake);
    if (accepted >= 0) ::close(accepted);
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // The guard's descriptor of the pair's listening socket (gloo's own stays gloo's to close).
  const int socket;
  // An eventfd that gloo's loop watches in place of the listening socket: the guard signals it
  // once `accepted` holds the peer's proven connection, and gloo's accept() then takes that.
  const int wake;
  // Guarded by the registry's mutex.
  int accepted = -1;
  // gloo unregistered its listening socket: the pair closed, or it connects to its peer instead.
  bool withdrawn = false;
};

namespace {

// gloo's listening descriptors taken by the guard, from the pair's creation until gloo unregisters
// them. Never destroyed: gloo's loop thread may call through the redirected imports at exit.
struct Registry {
  std::mutex mutex;
  std::map<int, std::shared_ptr<PairGuard::Listener>> byGlooFd;
};

Registry& registry() {
  static Registry* instance = new Registry();
  return *instance;
}

bool isListening(int fd) {
  int listening = 0;
  socklen_t length = sizeof(listening);
  return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) == 0 && listening != 0;
}

// The guard's own descriptor of gloo's listening socket `fd`, non-blocking, and the eventfd for
// gloo's loop; nullptr (errno set) when the kernel refuses one of them.
std::shared_ptr<PairGuard::Listener> takeListener(int fd) {
  const int socket = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (socket < 0) return nullptr;
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    const int error = errno;
    ::close(socket);
    errno = error;
    return nullptr;
  }
  auto listener = std::make_shared<PairGuard::Listener>(socket, wake);
  const int flags = fcntl(socket, F_GETFL);
  if (flags >= 0 && fcntl(socket, F_SETFL, flags | O_NONBLOCK) == 0 && ::listen(socket, kBacklog) == 0) return listener;
  const int error = errno;
  listener.reset();
  errno = error;
  return nullptr;
}

int guardedEpollCtl(int epoll, int op, int fd, epoll_event* event) {
  std::shared_ptr<PairGuard::Listener> listener;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto found = registry().byGlooFd.find(fd);
    if (found != registry().byGlooFd.end()) {
      listener = found->second;
      if (op == EPOLL_CTL_DEL) {
        listener->withdrawn = true;
        registry().byGlooFd.erase(found);
      }
    }
  }
  if (listener != nullptr) return realEpollCtl(epoll, op, listener->wake, event);
  if (op != EPOLL_CTL_ADD || capturing == nullptr || *capturing != nullptr || !isListening(fd)) return realEpollCtl(epoll, op, fd, event);
  listener = takeListener(fd);
  if (listener == nullptr) return -1;
  if (realEpollCtl(epoll, op, listener->wake, event) != 0) {
    const int error = errno;
    listener.reset();
    errno = error;
    return -1;
  }
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().byGlooFd[fd] = listener;
  *capturing = listener;
  return 0;
}

int guardedAccept(int fd, sockaddr* address, socklen_t* length) {
  int accepted = -1;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto found = registry().byGlooFd.find(fd);
    if (found == registry().byGlooFd.end()) return realAccept(fd, address, length);
    std::swap(accepted, found->second->accepted);
  }
  // gloo's loop calls accept() only once the guard signalled a proven connection.
  if (accepted < 0) {
    errno = EAGAIN;
    return -1;
  }
  if (address != nullptr && length != nullptr) getpeername(accepted, address, length);
  return accepted;
}

int guardedConnect(int fd, const sockaddr* address, socklen_t length) {
  PairGuard::Handshake* handshake = handshaking;
  if (handshake == nullptr) return realConnect(fd, address, length);
  handshaking = nullptr;
  return handshake->run(fd, address, length);
}

void put32(uint8_t* out, uint32_t value) {
  for (int i = 0; i < 4; i++) out[i] = static_cast<uint8_t>(value >> (8 * i));
}

uint32_t get32(const uint8_t* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; i++) value |= static_cast<uint32_t>(in[i]) << (8 * i);
  return value;
}

Hello helloOf(const std::array<uint8_t, 32>& proof) {
  Hello hello;
  put32(hello.data(), kHelloMagic);
  put32(hello.data() + 4, kHelloVersion);
  std::copy(proof.begin(), proof.end(), hello.begin() + 8);
  return hello;
}

bool proves(const Hello& hello, const std::array<uint8_t, 32>& proof) {
  return get32(hello.data()) == kHelloMagic && get32(hello.data() + 4) == kHelloVersion &&
         CRYPTO_memcmp(hello.data() + 8, proof.data(), proof.size()) == 0;
}

// Waits until `fd` is ready for `events`: Failure(Closed) once `abort` is signalled,
// Failure(Timeout) at the deadline.
void await(int fd, short events, Deadline deadline, int abort, const std::string& waitingFor) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) throw Failure(FailureCode::Timeout, "the connect timeout passed while " + waitingFor);
    pollfd fds[2] = {{abort, POLLIN, 0}, {fd, events, 0}};
    const int ready = poll(fds, 2, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready < 0 && errno != EINTR) throw Failure(FailureCode::Io, std::string("poll: ") + std::strerror(errno));
    if (ready <= 0) continue;
    if (fds[0].revents != 0) throw Failure(FailureCode::Closed, "the group was destroyed while it connected");
    if (fds[1].revents != 0) return;
  }
}

// Writes all of `hello` on the non-blocking `fd`; false when the connection failed.
bool sendHello(int fd, const Hello& hello, Deadline deadline, int abort, const std::string& peer) {
  size_t sent = 0;
  while (sent < hello.size()) {
    const ssize_t n = send(fd, hello.data() + sent, hello.size() - sent, MSG_NOSIGNAL);
    if (n > 0) sent += static_cast<size_t>(n);
    else if (n < 0 && (errno == EAGAIN || errno == EINTR)) await(fd, POLLOUT, deadline, abort, "sending this rank's proof to " + peer);
    else return false;
  }
  return true;
}

// A connection accepted by the listening side, until it proves itself or is dropped.
struct Candidate {
  int fd;
  Hello hello{};
  size_t got = 0;
};

}  // namespace

std::vector<uint8_t> PairGuard::newSecret() {
  std::vector<uint8_t> secret(kSecretBytes);
  size_t got = 0;
  while (got < secret.size()) {
    const ssize_t n = getrandom(secret.data() + got, secret.size() - got, 0);
    if (n < 0 && errno != EINTR) throw Failure(FailureCode::Io, std::string("getrandom: ") + std::strerror(errno));
    if (n > 0) got += static_cast<size_t>(n);
  }
  return secret;
}

PairProofs PairGuard::proofs(const std::vector<uint8_t>& secret, int rank, int peer) {
  const auto proof = [&](int from, int to) {
    static constexpr char kLabel[] = "tensorlane gloo pair";
    uint8_t message[sizeof(kLabel) - 1 + 8];
    std::memcpy(message, kLabel, sizeof(kLabel) - 1);
    put32(message + sizeof(kLabel) - 1, static_cast<uint32_t>(from));
    put32(message + sizeof(kLabel) + 3, static_cast<uint32_t>(to));
    std::array<uint8_t, 32> out{};
    unsigned int length = 0;
    if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), message, sizeof(message), out.data(), &length) == nullptr ||
        length != out.size()) {
      throw Failure(FailureCode::Io, "HMAC-SHA256 of a gloo pair's proof failed");
    }
    return out;
  };
  return PairProofs{proof(rank, peer), proof(peer, rank)};
}

void PairGuard::install() {
  static std::once_flag once;
  static std::optional<Failure> failed;
  std::call_once(once, [] {
    try {
      const void* inGloo = reinterpret_cast<const void*>(&::gloo::transport::tcp::CreateDevice);
      realEpollCtl = reinterpret_cast<EpollCtlFunction>(redirectImport(inGloo, "epoll_ctl", reinterpret_cast<void*>(&guardedEpollCtl)));
      realAccept = reinterpret_cast<AcceptFunction>(redirectImport(inGloo, "accept", reinterpret_cast<void*>(&guardedAccept)));
      realConnect = reinterpret_cast<ConnectFunction>(redirectImport(inGloo, "connect", reinterpret_cast<void*>(&guardedConnect)));
    } catch (const Failure& failure) {
      failed = failure;
    }
  });
  if (failed.has_value()) throw *failed;
}

PairGuard::Capture::Capture() {
  capturing = &listener_;
}

PairGuard::Capture::~Capture() {
  capturing = nullptr;
}

std::shared_ptr<PairGuard::Listener> PairGuard::Capture::take() {
  capturing = nullptr;
  if (listener_ == nullptr) {
    throw Failure(FailureCode::Io, "gloo's new pair registered no listening socket of its own: this libgloo connects its pairs in a way tensorlane cannot guard");
  }
  return std::move(listener_);
}

void PairGuard::admit(const std::shared_ptr<Listener>& listener, const PairProofs& proofs, Deadline deadline, int abort, const std::string& peer) {
  std::deque<Candidate> candidates;
  size_t strangers = 0;
  const auto drop = [&](int fd) {
    ::close(fd);
    strangers++;
  };
  struct CloseLeft {
    std::deque<Candidate>& candidates;
    ~CloseLeft() {
      for (const auto& c : candidates) ::close(c.fd);
    }
  } closeLeft{candidates};
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      throw Failure(FailureCode::Timeout, peer + " did not connect and prove the group's secret within the connect timeout; " +
                                                std::to_string(strangers + candidates.size()) + " other connections to the pair's port were closed");
    }
    std::vector<pollfd> fds = {{abort, POLLIN, 0}, {listener->socket, POLLIN, 0}};
    for (const auto& c : candidates) fds.push_back({c.fd, POLLIN, 0});
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready < 0 && errno != EINTR) throw Failure(FailureCode::Io, std::string("poll: ") + std::strerror(errno));
    if (ready <= 0) continue;
    if (fds[0].revents != 0) throw Failure(FailureCode::Closed, "the group was destroyed while it connected");
    // Candidates first: the ones accepted below have no poll result yet.
    std::deque<Candidate> kept;
    int proven = -1;
    for (size_t i = 0; i < candidates.size(); i++) {
      Candidate& c = candidates[i];
      if (proven >= 0 || fds[i + 2].revents == 0) {
        kept.push_back(c);
        continue;
      }
      const ssize_t n = recv(c.fd, c.hello.data() + c.got, c.hello.size() - c.got, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        kept.push_back(c);
      } else if (n <= 0) {
        drop(c.fd);
      } else if ((c.got += static_cast<size_t>(n)) < c.hello.size()) {
        kept.push_back(c);
      } else if (!proves(c.hello, proofs.expected)) {
        drop(c.fd);
      } else {
        bool answered = false;
        try {
          answered = sendHello(c.fd, helloOf(proofs.sent), deadline, abort, peer);
        } catch (const Failure&) {
          ::close(c.fd);
          throw;
        }
        if (answered) proven = c.fd;
        else drop(c.fd);
      }
    }
    candidates.swap(kept);
    if (proven >= 0) {
      std::lock_guard<std::mutex> lock(registry().mutex);
      if (listener->withdrawn) {
        ::close(proven);
        throw Failure(FailureCode::Closed, "the group was destroyed while it connected");
      }
      listener->accepted = proven;
      const uint64_t one = 1;
      if (write(listener->wake, &one, sizeof(one)) != sizeof(one)) throw Failure(FailureCode::Io, std::string("eventfd: ") + std::strerror(errno));
      return;
    }
    if (fds[1].revents == 0) continue;
    for (;;) {
      const int fd = accept4(listener->socket, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) break;
        throw Failure(FailureCode::Io, std::string("accept: ") + std::strerror(errno));
      }
      candidates.push_back(Candidate{fd});
      if (candidates.size() > kMaxCandidates) {
        drop(candidates.front().fd);
        candidates.pop_front();
      }
    }
  }
}

PairGuard::Handshake::Handshake(const PairProofs& proofs, Deadline deadline, int abort, std::string peer)
    : proofs_(proofs), deadline_(deadline), abort_(abort), peer_(std::move(peer)) {
  handshaking = this;
}

PairGuard::Handshake::~Handshake() {
  if (handshaking == this) handshaking = nullptr;
}

int PairGuard::Handshake::run(int fd, const sockaddr* address, socklen_t length) {
  if (realConnect(fd, address, length) != 0 && errno != EINPROGRESS) return -1;
  try {
    await(fd, POLLOUT, deadline_, abort_, "connecting to " + peer_);
    int error = 0;
    socklen_t size = sizeof(error);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
    if (error != 0) {
      errno = error;
      return -1;
    }
    if (!sendHello(fd, helloOf(proofs_.sent), deadline_, abort_, peer_)) {
      throw Failure(FailureCode::Io, "the connection to " + peer_ + " broke while this rank proved the group's secret: " + std::strerror(errno));
    }
    Hello reply{};
    size_t got = 0;
    while (got < reply.size()) {
      const ssize_t n = recv(fd, reply.data() + got, reply.size() - got, 0);
      if (n > 0) got += static_cast<size_t>(n);
      else if (n < 0 && (errno == EAGAIN || errno == EINTR)) await(fd, POLLIN, deadline_, abort_, "waiting for " + peer_ + " to prove the group's secret");
      else break;
    }
    if (got < reply.size() || !proves(reply, proofs_.expected)) {
      throw Failure(FailureCode::Protocol, "the process listening for " + peer_ + " did not prove the group's secret: it is not " + peer_);
    }
    return 0;
  } catch (const Failure& failure) {
    failure_ = failure;
    errno = ECONNREFUSED;
    return -1;
  }
}

}  // namespace tensorlane::gloo
