#include "ReadJob.h"

#include "NixlLibrary.h"
#include "ProcessAgent.h"

#include <chrono>
#include <set>
#include <system_error>
#include <thread>

namespace tensorlane::nixl {

namespace {

/** Frees what NIXL handed out for one request, whatever happened to it. */
struct RequestParts {
  NixlLibrary& nixl;
  nixl_capi_agent_t agent;
  nixl_capi_xfer_dlist_t local = nullptr;
  nixl_capi_xfer_dlist_t remote = nullptr;
  nixl_capi_xfer_req_t request = nullptr;
  bool released = false;

  ~RequestParts() {
    if (request != nullptr) {
      if (!released) nixl.releaseXferReq(agent, request);
      nixl.destroyXferReq(request);
    }
    if (local != nullptr) nixl.destroyXferDlist(local);
    if (remote != nullptr) nixl.destroyXferDlist(remote);
  }
};

/** Spins briefly (small reads finish in microseconds), then backs off to spare the cores. */
class Backoff {
 public:
  void pause() {
    if (++rounds_ < 256) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleepUs_));
    if (sleepUs_ < 500) sleepUs_ *= 2;
  }

 private:
  unsigned rounds_ = 0;
  unsigned sleepUs_ = 10;
};

}  // namespace

Napi::Object ReadJob::Start(Napi::Env env, std::unique_ptr<ReadPlan> plan, Napi::Value keep) {
  auto job = std::unique_ptr<ReadJob>(new ReadJob(std::move(plan), keep));
  std::shared_ptr<std::atomic<bool>> aborted = job->aborted_;
  job->settler_ = Settler::create(env, [aborted] { aborted->store(true); });
  Napi::Object operation = Napi::Object::New(env);
  operation.Set("promise", job->settler_->promise());
  operation.Set("abort", Napi::Function::New(env, [aborted](const Napi::CallbackInfo&) { aborted->store(true); }, "abort"));
  try {
    std::thread([raw = job.get()] { raw->run(); }).detach();
  } catch (const std::system_error& error) {
    job->settler_->cancel();
    throw Failure(FailureCode::Transfer, std::string("cannot start a thread for the NIXL READ: ") + error.what());
  }
  job.release();
  return operation;
}

ReadJob::ReadJob(std::unique_ptr<ReadPlan> plan, Napi::Value keep)
    : plan_(std::move(plan)), keep_(Napi::Persistent(keep)), aborted_(std::make_shared<std::atomic<bool>>(false)) {}

void ReadJob::run() {
  try {
    execute();
  } catch (const Failure& failure) {
    failure_ = failure;
  } catch (const std::exception& error) {
    failure_ = Failure(FailureCode::Transfer, error.what());
  }
  // A copy: once handed over, the job (and so its members) may be deleted at any moment.
  std::shared_ptr<Settler> settler = settler_;
  if (settler->finish([this](Napi::Env env, Napi::Promise::Deferred& deferred) { settle(env, deferred); })) return;
  // The environment that started us is gone: nothing to settle, and the references belong to that
  // environment, so they are left to it.
  keep_.SuppressDestruct();
  delete this;
}

void ReadJob::execute() {
  ProcessAgent& agent = ProcessAgent::instance();
  nixl_capi_agent_t handle = agent.handle();
  // Destinations must be registered locally for NIXL to write into them: one reference per
  // storage for the duration of the read (free when a pool or pinned registration holds them).
  std::vector<RegionTable::Key> acquired;
  std::set<std::pair<uintptr_t, uint64_t>> storages;
  struct Release {
    ProcessAgent& agent;
    std::vector<RegionTable::Key>& keys;
    ~Release() {
      for (const auto& key : keys) {
        try {
          agent.release(key);
        } catch (const Failure&) {
          // Deregistering a transient destination cannot fail the read that already landed.
        }
      }
    }
  } release{agent, acquired};
  for (const LocalTensor& local : plan_->local()) {
    if (local.nbytes == 0 || !storages.insert({local.storageAddress, local.storageLength}).second) continue;
    acquired.push_back(agent.acquire(local.storageAddress, local.storageLength, local.mem, local.device));
  }
  if (plan_->spans().empty()) return;
  if (aborted_->load()) throw Failure(FailureCode::Aborted, "the read was aborted before it started");
  agent.beginTransfer(plan_->agent(), plan_->blob(), plan_->epoch(), plan_->regions(), plan_->descs());
  try {
    // One request per pair of memory kinds (a NIXL descriptor list holds one kind).
    const std::vector<Span>& spans = plan_->spans();
    size_t first = 0;
    while (first < spans.size()) {
      size_t count = 1;
      while (first + count < spans.size() && spans[first + count].localMem == spans[first].localMem &&
             spans[first + count].remoteMem == spans[first].remoteMem) {
        count++;
      }
      transfer(handle, first, count);
      first += count;
    }
  } catch (const Failure& failure) {
    agent.endTransfer(plan_->agent());
    // A failed peer leaves a broken endpoint behind: the next object from it reconnects.
    if (failure.code() == FailureCode::Transfer) agent.forgetRemote(plan_->agent());
    throw;
  }
  agent.endTransfer(plan_->agent());
}

void ReadJob::transfer(nixl_capi_agent_t agent, size_t first, size_t count) {
  NixlLibrary& nixl = NixlLibrary::get();
  const std::vector<Span>& spans = plan_->spans();
  RequestParts parts{nixl, agent};
  int status = nixl.createXferDlist(spans[first].localMem, &parts.local);
  if (status == NIXL_CAPI_SUCCESS) status = nixl.createXferDlist(spans[first].remoteMem, &parts.remote);
  for (size_t i = first; i < first + count && status == NIXL_CAPI_SUCCESS; i++) {
    status = nixl.xferDlistAddDesc(parts.local, spans[i].local, spans[i].length, spans[i].localDevice);
    if (status == NIXL_CAPI_SUCCESS) status = nixl.xferDlistAddDesc(parts.remote, spans[i].remote, spans[i].length, spans[i].remoteDevice);
  }
  if (status != NIXL_CAPI_SUCCESS) throw Failure(FailureCode::Transfer, "NIXL cannot build descriptor lists: status " + std::to_string(status));
  status = nixl.createXferReq(agent, NIXL_CAPI_XFER_OP_READ, parts.local, parts.remote, plan_->agent().c_str(), &parts.request, nullptr);
  if (status != NIXL_CAPI_SUCCESS) {
    throw Failure(FailureCode::Transfer, "NIXL cannot prepare a READ from " + plan_->agent() + " (status " + std::to_string(status) +
                                             "): the producer is unreachable or its memory is gone");
  }
  status = nixl.postXferReq(agent, parts.request, nullptr);
  Backoff backoff;
  while (status == NIXL_CAPI_IN_PROG) {
    if (aborted_->load()) {
      // Releasing an in-flight request cancels it in UCX; if NIXL refuses, the read continues into
      // memory we still hold, and we wait for its end before letting the buffers go.
      if (nixl.releaseXferReq(agent, parts.request) == NIXL_CAPI_SUCCESS) {
        parts.released = true;
        throw Failure(FailureCode::Aborted, "the READ from " + plan_->agent() + " was aborted");
      }
      while (nixl.getXferStatus(agent, parts.request) == NIXL_CAPI_IN_PROG) backoff.pause();
      throw Failure(FailureCode::Aborted, "the READ from " + plan_->agent() + " was aborted");
    }
    backoff.pause();
    status = nixl.getXferStatus(agent, parts.request);
  }
  if (status != NIXL_CAPI_SUCCESS) {
    throw Failure(FailureCode::Transfer, "the NIXL READ from " + plan_->agent() + " failed (status " + std::to_string(status) +
                                             "): the producer died or its memory became unreachable");
  }
}

void ReadJob::settle(Napi::Env env, Napi::Promise::Deferred& deferred) {
  std::unique_ptr<ReadJob> owned(this);
  if (failure_.has_value()) {
    deferred.Reject(failure_->toError(env).Value());
  } else {
    deferred.Resolve(env.Undefined());
  }
  keep_.Reset();
}

}  // namespace tensorlane::nixl
