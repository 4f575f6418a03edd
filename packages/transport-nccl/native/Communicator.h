// One rank's NCCL communicator with a native thread of its own: every NCCL call on it (init,
// transfers, collectives, registrations, windows, destroy) runs on that thread, in the order
// posted, so that no JS thread ever blocks on NCCL and NCCL never sees concurrent calls on one
// communicator. Communicators are non-blocking: their waits poll ncclCommGetAsyncError and the
// stream, and a timeout or an abort ends them with ncclCommAbort (the communicator is then broken
// until its group is destroyed and created again).
//
// Communicators are process-wide, by group name: the transfer agent's worker creates them, and
// the main thread's memory pools register memory with them.
#pragma once

#include "NcclApi.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tensorlane::nccl {

/** A device memory range of an operation. */
struct DeviceBuffer {
  uintptr_t address = 0;
  size_t count = 0;
  ncclDataType_t dtype = ncclUint8;
};

struct CommunicatorInfo {
  /** New for every communicator the process creates: a group created again under the same name gets another. */
  uint64_t id = 0;
  std::string name;
  int rank = 0;
  int size = 0;
  int device = 0;
  bool ready = false;
  std::string broken;
  size_t registrations = 0;
  size_t windows = 0;
};

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  using Task = std::function<void()>;
  using Clock = std::chrono::steady_clock;

  /** Registers a new communicator under `name` and starts its thread; a Usage failure if the name is taken. */
  static std::shared_ptr<Communicator> create(const std::string& name, int rank, int size, int device);
  /** The communicator of group `name`; a Closed failure when there is none. */
  static std::shared_ptr<Communicator> find(const std::string& name);
  static std::vector<CommunicatorInfo> list();

  ~Communicator();

  /** Any thread: runs `task` on the communicator's thread, after the tasks posted before it. */
  void post(Task task);
  /** Any thread: the running (or next) wait ends with ncclCommAbort. */
  void requestAbort(const std::string& reason);

  // The rest runs on the communicator's thread only (inside posted tasks).
  void init(const ncclUniqueId& id, std::chrono::milliseconds timeout);
  /** Every buffer sent to (or received from) `peer` inside one NCCL group call. */
  void transfer(int peer, bool send, const std::vector<DeviceBuffer>& buffers, std::chrono::milliseconds timeout);
  void allReduce(const std::vector<DeviceBuffer>& buffers, ncclRedOp_t op, std::chrono::milliseconds timeout);
  void broadcast(const std::vector<DeviceBuffer>& buffers, int root, std::chrono::milliseconds timeout);
  uintptr_t registerBuffer(uintptr_t address, size_t bytes, std::chrono::milliseconds timeout);
  void deregisterBuffer(uintptr_t handle, std::chrono::milliseconds timeout);
  uintptr_t registerWindow(uintptr_t address, size_t bytes, int flags, std::chrono::milliseconds timeout);
  void deregisterWindow(uintptr_t handle, std::chrono::milliseconds timeout);
  /** ncclCommAbort now (NCCL frees the registrations and windows with it); the communicator is broken for `reason`. */
  void abort(const std::string& reason);
  /**
   * Unregisters from the process-wide table, deregisters leftover windows (with the window API)
   * and buffers, then finalizes and destroys the communicator (or aborts it when that fails or it
   * is broken), and stops the thread after this task.
   */
  void destroy(std::chrono::milliseconds timeout);

  CommunicatorInfo info();

 private:
  Communicator(const std::string& name, int rank, int size, int device);

  void loop();
  void ensureReady(const char* what);
  /** Fails unless NCCL accepted a call; aborts the communicator when NCCL reports it in an error state. */
  void accepted(ncclResult_t result, const std::string& what);
  /** Waits until NCCL finished its asynchronous work and `done` holds; timeout or abort request → ncclCommAbort. */
  void wait(const std::string& what, Clock::time_point deadline, const std::function<bool()>& done);
  void waitStream(const std::string& what, std::chrono::milliseconds timeout);
  /** Aborts the communicator (NCCL frees its registrations with it) and marks it broken. */
  void breakWith(const std::string& reason);

  const uint64_t id_;
  const std::string name_;
  const int rank_;
  const int size_;
  const int device_;

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::map<uintptr_t, size_t> registrations_;
  /** In registration order, which is the same on every rank: window calls are collective. */
  std::vector<uintptr_t> windows_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Task> tasks_;
  bool stopping_ = false;
  /** Set by the thread as it ends; later tasks run (and fail) on the posting thread. */
  bool exited_ = false;
  bool ready_ = false;
  std::string broken_;
  std::string abortReason_;
  std::atomic<bool> abortRequested_{false};
};

}  // namespace tensorlane::nccl
