#include "Communicator.h"

#include "CudaRuntime.h"
#include "NcclLibrary.h"

#include <tensorlane/Failure.h>

#include <algorithm>
#include <thread>

namespace tensorlane::nccl {

namespace {

std::mutex gRegistryMutex;
std::map<std::string, std::shared_ptr<Communicator>> gRegistry;
std::atomic<uint64_t> gNextId{1};

bool isAccepted(ncclResult_t result) { return result == ncclSuccess || result == ncclInProgress; }

void* pointer(uintptr_t address) { return reinterpret_cast<void*>(address); }

}  // namespace

std::shared_ptr<Communicator> Communicator::create(const std::string& name, int rank, int size, int device) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  if (gRegistry.count(name) != 0) throw Failure(FailureCode::Usage, "an NCCL communicator for group \"" + name + "\" already exists in this process");
  std::shared_ptr<Communicator> comm(new Communicator(name, rank, size, device));
  gRegistry[name] = comm;
  std::thread([comm] { comm->loop(); }).detach();
  return comm;
}

std::shared_ptr<Communicator> Communicator::find(const std::string& name) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  auto it = gRegistry.find(name);
  if (it == gRegistry.end()) throw Failure(FailureCode::Closed, "this process has no NCCL communicator for group \"" + name + "\"");
  return it->second;
}

std::vector<CommunicatorInfo> Communicator::list() {
  std::vector<std::shared_ptr<Communicator>> all;
  {
    std::lock_guard<std::mutex> lock(gRegistryMutex);
    for (auto& [_, comm] : gRegistry) all.push_back(comm);
  }
  std::vector<CommunicatorInfo> out;
  for (auto& comm : all) out.push_back(comm->info());
  return out;
}

Communicator::Communicator(const std::string& name, int rank, int size, int device)
    : id_(gNextId++), name_(name), rank_(rank), size_(size), device_(device) {}

Communicator::~Communicator() = default;

void Communicator::post(Task task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!exited_) {
      tasks_.push_back(std::move(task));
      wake_.notify_one();
      return;
    }
  }
  // The thread is gone (destroyed): the task fails at once, here, without touching NCCL.
  task();
}

void Communicator::requestAbort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (abortRequested_) return;
  abortReason_ = reason;
  abortRequested_ = true;
}

void Communicator::loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return !tasks_.empty() || stopping_; });
      if (tasks_.empty()) {
        exited_ = true;
        return;
      }
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    // Tasks settle their own promises; nothing may escape the thread.
    try {
      task();
    } catch (...) {
    }
  }
}

CommunicatorInfo Communicator::info() {
  std::lock_guard<std::mutex> lock(mutex_);
  return CommunicatorInfo{id_, name_, rank_, size_, device_, ready_, broken_, registrations_.size(), windows_.size()};
}

void Communicator::ensureReady(const char* what) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) throw Failure(FailureCode::Closed, std::string(what) + ": the NCCL communicator of group \"" + name_ + "\" was destroyed");
  if (!broken_.empty()) {
    throw Failure(FailureCode::Closed, std::string(what) + ": the NCCL communicator of group \"" + name_ + "\" is broken (" + broken_ +
                                           "); destroy the group and create it again");
  }
  if (!ready_) throw Failure(FailureCode::Usage, std::string(what) + ": the NCCL communicator of group \"" + name_ + "\" is not initialized");
}

void Communicator::breakWith(const std::string& reason) {
  if (comm_ != nullptr) NcclLibrary::get().commAbort(comm_);
  comm_ = nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  registrations_.clear();
  windows_.clear();
  ready_ = false;
  if (broken_.empty()) broken_ = reason;
}

void Communicator::accepted(ncclResult_t result, const std::string& what) {
  if (isAccepted(result)) return;
  NcclLibrary& nccl = NcclLibrary::get();
  const std::string text = what + " failed: " + nccl.describe(result, comm_);
  // A refused call (a registration NCCL could not make, say) leaves a healthy communicator
  // usable; only one in an error state must be aborted.
  ncclResult_t state = ncclSuccess;
  if (nccl.commGetAsyncError(comm_, &state) != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) breakWith(text);
  throw Failure(FailureCode::Nccl, text);
}

void Communicator::wait(const std::string& what, Clock::time_point deadline, const std::function<bool()>& done) {
  NcclLibrary& nccl = NcclLibrary::get();
  auto pause = std::chrono::microseconds(1);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t asked = nccl.commGetAsyncError(comm_, &state);
    if (asked != ncclSuccess) state = asked;
    if (state != ncclSuccess && state != ncclInProgress) {
      const std::string text = what + " failed: " + nccl.describe(state, comm_);
      breakWith(text);
      throw Failure(FailureCode::Nccl, text);
    }
    if (state == ncclSuccess && done()) return;
    if (abortRequested_) {
      std::string reason;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        reason = abortReason_;
      }
      breakWith(what + " was aborted (" + reason + ")");
      throw Failure(FailureCode::Aborted, what + " was aborted: " + reason);
    }
    if (Clock::now() >= deadline) {
      breakWith(what + " timed out");
      throw Failure(FailureCode::Timeout, what + " timed out; the communicator was aborted (ncclCommAbort)");
    }
    // Spin briefly (small transfers finish in microseconds), then back off to a millisecond.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void Communicator::waitStream(const std::string& what, std::chrono::milliseconds timeout) {
  CudaRuntime& cuda = CudaRuntime::get();
  wait(what, Clock::now() + timeout, [&] {
    cudaError_t status = cuda.streamQuery(stream_);
    if (status == cudaErrorNotReady) return false;
    if (status != cudaSuccess) {
      const std::string text = what + ": the CUDA stream failed: " + cuda.getErrorString(status);
      breakWith(text);
      throw Failure(FailureCode::Cuda, text);
    }
    return true;
  });
}

void Communicator::init(const ncclUniqueId& id, std::chrono::milliseconds timeout) {
  const std::string what = "ncclCommInitRankConfig (group \"" + name_ + "\", rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ")";
  CudaRuntime& cuda = CudaRuntime::get();
  NcclLibrary& nccl = NcclLibrary::get();
  // NCCL initializes on the current device. Without any driver or device NCCL's init runs and fails
  // by itself (ncclUnhandledCudaError at once: it neither hangs nor crashes); only a missing ordinal
  // on a machine with GPUs is refused first, since NCCL would then quietly use another device.
  const std::string missing = cuda.absence(device_);
  if (!missing.empty() && cuda.probe().count > 0) throw Failure(FailureCode::NoDevice, missing);
  if (missing.empty()) cuda.check(cuda.setDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
  tlNcclConfig config{sizeof(tlNcclConfig), TL_NCCL_CONFIG_MAGIC, TL_NCCL_VERSION(2, 17, 0), 0,
                      TL_NCCL_CONFIG_UNDEF_INT, TL_NCCL_CONFIG_UNDEF_INT, TL_NCCL_CONFIG_UNDEF_INT, nullptr};
  ncclResult_t result = nccl.commInitRankConfig(&comm_, size_, id, rank_, &config);
  if (!isAccepted(result)) {
    const std::string text = what + " failed: " + nccl.describe(result, comm_);
    breakWith(text);
    if (result == ncclUnhandledCudaError && !missing.empty()) throw Failure(FailureCode::NoDevice, text + "; " + missing);
    throw Failure(FailureCode::Nccl, text);
  }
  cuda.check(cuda.streamCreateWithFlags(&stream_, TL_CUDA_STREAM_NON_BLOCKING), "cudaStreamCreateWithFlags");
  wait(what, Clock::now() + timeout, [] { return true; });
  std::lock_guard<std::mutex> lock(mutex_);
  ready_ = true;
}

void Communicator::transfer(int peer, bool send, const std::vector<DeviceBuffer>& buffers, std::chrono::milliseconds timeout) {
  const std::string what = std::string(send ? "ncclSend to" : "ncclRecv from") + " rank " + std::to_string(peer) + " in group \"" + name_ + "\"";
  ensureReady(what.c_str());
  NcclLibrary& nccl = NcclLibrary::get();
  accepted(nccl.groupStart(), "ncclGroupStart");
  ncclResult_t result = ncclSuccess;
  for (const auto& b : buffers) {
    result = send ? nccl.send(pointer(b.address), b.count, b.dtype, peer, comm_, stream_)
                  : nccl.recv(pointer(b.address), b.count, b.dtype, peer, comm_, stream_);
    if (!isAccepted(result)) break;
  }
  ncclResult_t ended = nccl.groupEnd();
  accepted(isAccepted(result) ? ended : result, what);
  waitStream(what, timeout);
}

void Communicator::allReduce(const std::vector<DeviceBuffer>& buffers, ncclRedOp_t op, std::chrono::milliseconds timeout) {
  const std::string what = "ncclAllReduce in group \"" + name_ + "\"";
  ensureReady(what.c_str());
  NcclLibrary& nccl = NcclLibrary::get();
  accepted(nccl.groupStart(), "ncclGroupStart");
  ncclResult_t result = ncclSuccess;
  for (const auto& b : buffers) {
    result = nccl.allReduce(pointer(b.address), pointer(b.address), b.count, b.dtype, op, comm_, stream_);
    if (!isAccepted(result)) break;
  }
  ncclResult_t ended = nccl.groupEnd();
  accepted(isAccepted(result) ? ended : result, what);
  waitStream(what, timeout);
}

void Communicator::broadcast(const std::vector<DeviceBuffer>& buffers, int root, std::chrono::milliseconds timeout) {
  const std::string what = "ncclBroadcast from rank " + std::to_string(root) + " in group \"" + name_ + "\"";
  ensureReady(what.c_str());
  NcclLibrary& nccl = NcclLibrary::get();
  accepted(nccl.groupStart(), "ncclGroupStart");
  ncclResult_t result = ncclSuccess;
  for (const auto& b : buffers) {
    result = nccl.broadcast(pointer(b.address), pointer(b.address), b.count, b.dtype, root, comm_, stream_);
    if (!isAccepted(result)) break;
  }
  ncclResult_t ended = nccl.groupEnd();
  accepted(isAccepted(result) ? ended : result, what);
  waitStream(what, timeout);
}

uintptr_t Communicator::registerBuffer(uintptr_t address, size_t bytes, std::chrono::milliseconds timeout) {
  const std::string what = "ncclCommRegister in group \"" + name_ + "\"";
  ensureReady(what.c_str());
  NcclLibrary& nccl = NcclLibrary::get();
  if (nccl.commRegister == nullptr) throw Failure(FailureCode::Version, "ncclCommRegister needs NCCL >= 2.19");
  void* handle = nullptr;
  accepted(nccl.commRegister(comm_, pointer(address), bytes, &handle), what);
  wait(what, Clock::now() + timeout, [] { return true; });
  const auto out = reinterpret_cast<uintptr_t>(handle);
  std::lock_guard<std::mutex> lock(mutex_);
  registrations_[out] = bytes;
  return out;
}

void Communicator::deregisterBuffer(uintptr_t handle, std::chrono::milliseconds timeout) {
  const std::string what = "ncclCommDeregister in group \"" + name_ + "\"";
  ensureReady(what.c_str());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (registrations_.count(handle) == 0) throw Failure(FailureCode::Usage, what + ": unknown registration handle");
  }
  NcclLibrary& nccl = NcclLibrary::get();
  accepted(nccl.commDeregister(comm_, pointer(handle)), what);
  wait(what, Clock::now() + timeout, [] { return true; });
  std::lock_guard<std::mutex> lock(mutex_);
  registrations_.erase(handle);
}

uintptr_t Communicator::registerWindow(uintptr_t address, size_t bytes, int flags, std::chrono::milliseconds timeout) {
  const std::string what = "ncclCommWindowRegister in group \"" + name_ + "\"";
  ensureReady(what.c_str());
  NcclLibrary& nccl = NcclLibrary::get();
  if (nccl.commWindowRegister == nullptr || nccl.version < TL_NCCL_VERSION(2, 27, 3)) {
    throw Failure(FailureCode::Version, "ncclCommWindowRegister needs NCCL >= 2.27.3");
  }
  ncclWindow_t window = nullptr;
  accepted(nccl.commWindowRegister(comm_, pointer(address), bytes, &window, flags), what);
  wait(what, Clock::now() + timeout, [] { return true; });
  const auto out = reinterpret_cast<uintptr_t>(window);
  std::lock_guard<std::mutex> lock(mutex_);
  windows_.push_back(out);
  return out;
}

void Communicator::deregisterWindow(uintptr_t handle, std::chrono::milliseconds timeout) {
  const std::string what = "ncclCommWindowDeregister in group \"" + name_ + "\"";
  ensureReady(what.c_str());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(windows_.begin(), windows_.end(), handle) == windows_.end()) throw Failure(FailureCode::Usage, what + ": unknown window");
  }
  NcclLibrary& nccl = NcclLibrary::get();
  accepted(nccl.commWindowDeregister(comm_, reinterpret_cast<ncclWindow_t>(handle)), what);
  wait(what, Clock::now() + timeout, [] { return true; });
  std::lock_guard<std::mutex> lock(mutex_);
  // Looked up again: the lock was let go while NCCL deregistered, and a teardown may have cleared the list.
  const auto window = std::find(windows_.begin(), windows_.end(), handle);
  if (window != windows_.end()) windows_.erase(window);
}

void Communicator::abort(const std::string& reason) { breakWith(reason); }

void Communicator::destroy(std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(gRegistryMutex);
    auto it = gRegistry.find(name_);
    if (it != gRegistry.end() && it->second.get() == this) gRegistry.erase(it);
  }
  std::string failure;
  if (comm_ != nullptr) {
    NcclLibrary& nccl = NcclLibrary::get();
    const auto deadline = Clock::now() + timeout;
    try {
      // Windows first and with their own API: NCCL requires them gone before the communicator.
      // Deregistration is collective: every rank goes through them in reverse registration order
      // (their handles' order differs between ranks).
      std::vector<uintptr_t> windows;
      std::map<uintptr_t, size_t> registrations;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        windows = windows_;
        registrations = registrations_;
      }
      for (auto window = windows.rbegin(); window != windows.rend(); ++window) {
        accepted(nccl.commWindowDeregister(comm_, reinterpret_cast<ncclWindow_t>(*window)), "ncclCommWindowDeregister");
        wait("ncclCommWindowDeregister", deadline, [] { return true; });
      }
      for (auto& [handle, _] : registrations) {
        accepted(nccl.commDeregister(comm_, pointer(handle)), "ncclCommDeregister");
        wait("ncclCommDeregister", deadline, [] { return true; });
      }
      accepted(nccl.commFinalize(comm_), "ncclCommFinalize");
      wait("ncclCommFinalize", deadline, [] { return true; });
      nccl.commDestroy(comm_);
      comm_ = nullptr;
    } catch (const Failure& f) {
      failure = f.what();
      breakWith(failure);
    }
  }
  if (stream_ != nullptr) CudaRuntime::get().streamDestroy(stream_);
  stream_ = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    registrations_.clear();
    windows_.clear();
    ready_ = false;
    stopping_ = true;
  }
  if (!failure.empty()) throw Failure(FailureCode::Nccl, "destroying the NCCL communicator of group \"" + name_ + "\": " + failure);
}

}  // namespace tensorlane::nccl
