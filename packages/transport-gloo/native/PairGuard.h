#pragma once

#include <tensorlane/Failure.h>

#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tensorlane::gloo {

using Deadline = std::chrono::steady_clock::time_point;

// What the two ends of one pair show each other before gloo may use their connection: HMAC-SHA256
// of the group's secret over the direction (from, to), so that a proof shown to an impostor is
// worth nothing anywhere else.
struct PairProofs {
  std::array<uint8_t, 32> sent;      // this rank's, to the peer
  std::array<uint8_t, 32> expected;  // the peer's, to this rank
};

// Stands between Debian's gloo and the sockets of its TCP pairs. There each pair listens on a port
// of its own until its peer connects, and takes whatever connects first: any local user could make
// a group's creation fail (or worse) by connecting first. libgloo's calls to accept, connect and
// epoll_ctl are redirected here (ImportSlots.h): a pair's listening socket is watched by the guard
// instead of gloo's loop, and gloo accepts only a connection that proved the group's secret; its
// connecting side proves the secret and checks the listener's proof before gloo sends a byte.
class PairGuard {
 public:
  static constexpr size_t kSecretBytes = 32;

  // A group's secret, from the kernel's random source; Failure(Io) when it cannot give one.
  static std::vector<uint8_t> newSecret();
  static PairProofs proofs(const std::vector<uint8_t>& secret, int rank, int peer);

  // Once per process, before gloo's device (and its loop thread) exists; Failure(Io) when libgloo's
  // imports cannot be redirected, and then on every later call.
  static void install();

  // A pair's listening socket, taken from gloo's loop when the pair was created.
  class Listener;

  // While one lives on a thread, the listening socket of the pair gloo creates there is the guard's.
  class Capture {
   public:
    Capture();
    ~Capture();
    Capture(const Capture&) = delete;
    Capture& operator=(const Capture&) = delete;
    // Failure(Io) when the pair registered no listening socket (a gloo whose pairs do not listen on
    // their own sockets, which the guard does not know how to protect).
    std::shared_ptr<Listener> take();

   private:
    std::shared_ptr<Listener> listener_;
  };

  // The listening side of a pair: waits until a connection to `listener` proves `proofs.expected`,
  // answers it with `proofs.sent` and lets gloo accept it. A stranger (a wrong or missing proof, or
  // a connection that closes) is closed and the wait goes on. Failure(Timeout) at `deadline`,
  // Failure(Closed) once `abort` (an eventfd) is signalled or gloo withdrew the listener.
  static void admit(const std::shared_ptr<Listener>& listener, const PairProofs& proofs, Deadline deadline, int abort, const std::string& peer);

  // The connecting side of a pair: while one lives on a thread, the next connect() gloo makes there
  // shows `proofs.sent` and expects `proofs.expected` back, within `deadline` and until `abort`.
  class Handshake {
   public:
    Handshake(const PairProofs& proofs, Deadline deadline, int abort, std::string peer);
    ~Handshake();
    Handshake(const Handshake&) = delete;
    Handshake& operator=(const Handshake&) = delete;

    // What made the connect fail when the guard failed it (gloo's own message then says less).
    const std::optional<Failure>& failure() const { return failure_; }

    // In place of gloo's connect(): 0 once the listener proved itself, else -1 with errno set.
    int run(int fd, const sockaddr* address, socklen_t length);

   private:
    const PairProofs proofs_;
    const Deadline deadline_;
    const int abort_;
    const std::string peer_;
    std::optional<Failure> failure_;
  };
};

}  // namespace tensorlane::gloo
