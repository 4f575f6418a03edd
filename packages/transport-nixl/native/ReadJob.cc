#include "ReadJob.h"

#include "NixlLibrary.h"
#include "ProcessAgent.h"

#include <chrono>
#include <set>
#include <system_error>
#include <thread>

namespace tensorlane::nixl {

namespace {

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

/** What NIXL handed out for one request, freed whatever happened to it. */
struct ReadJob::Request {
  NixlLibrary& nixl;
  nixl_capi_agent_t agent;
  nixl_capi_xfer_dlist_t local = nullptr;
  nixl_capi_xfer_dlist_t remote = nullptr;
  nixl_capi_xfer_req_t request = nullptr;
  bool released = false;
  /** As the post or the last poll returned it. */
  int status = NIXL_CAPI_IN_PROG;

  ~Request() {
    if (request != nullptr) {
      if (!released) nixl.releaseXferReq(agent, request);
      nixl.destroyXferReq(request);
    }
    if (local != nullptr) nixl.destroyXferDlist(local);
    if (remote != nullptr) nixl.destroyXferDlist(remote);
  }
};

Napi::Object ReadJob::Start(Napi::Env env, std::unique_ptr<ReadPlan> plan, Napi::Value keep) {
  auto job = std::unique_ptr<ReadJob>(new ReadJob(std::move(plan), keep));
  Napi::Object operation = Napi::Object::New(env);
  uint64_t bytes = 0;
  for (const Span& span : job->plan_->spans()) bytes += span.length;
  if (bytes <= ProcessAgent::readHereBytes()) {
    bool over = true;
    try {
      over = job->advance(false);
    } catch (const Failure& failure) {
      job->failure_ = failure;
    } catch (const std::exception& error) {
      job->failure_ = Failure(FailureCode::Transfer, error.what());
    }
    if (over) {
      job->end();
      Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
      job->settle(env, deferred);
      operation.Set("promise", deferred.Promise());
      operation.Set("abort", Napi::Function::New(env, [](const Napi::CallbackInfo&) {}, "abort"));
      return operation;
    }
  }
  std::shared_ptr<std::atomic<bool>> aborted = job->aborted_;
  try {
    job->settler_ = Settler::create(env, [aborted] { aborted->store(true); });
    operation.Set("promise", job->settler_->promise());
    operation.Set("abort", Napi::Function::New(env, [aborted](const Napi::CallbackInfo&) { aborted->store(true); }, "abort"));
    std::thread([raw = job.get()] { raw->run(); }).detach();
  } catch (...) {
    job->abandon();
    try {
      throw;
    } catch (const std::system_error& error) {
      throw Failure(FailureCode::Transfer, std::string("cannot start a thread for the NIXL READ: ") + error.what());
    }
  }
  job.release();
  return operation;
}

ReadJob::ReadJob(std::unique_ptr<ReadPlan> plan, Napi::Value keep)
    : plan_(std::move(plan)), keep_(Napi::Persistent(keep)), aborted_(std::make_shared<std::atomic<bool>>(false)) {}

ReadJob::~ReadJob() = default;

void ReadJob::run() {
  try {
    advance(true);
  } catch (const Failure& failure) {
    failure_ = failure;
  } catch (const std::exception& error) {
    failure_ = Failure(FailureCode::Transfer, error.what());
  }
  end();
  // A copy: once handed over, the job (and so its members) may be deleted at any moment.
  std::shared_ptr<Settler> settler = settler_;
  if (settler->finish([this](Napi::Env env, Napi::Promise::Deferred& deferred) {
        std::unique_ptr<ReadJob> owned(this);
        settle(env, deferred);
      })) {
    return;
  }
  // The environment that started us is gone: nothing to settle, and the references belong to that
  // environment, so they are left to it.
  keep_.SuppressDestruct();
  delete this;
}

bool ReadJob::advance(bool mayWait) {
  ProcessAgent& agent = ProcessAgent::instance();
  if (!registered_) {
    // Destinations must be registered locally for NIXL to write into them: one reference per
    // storage for the duration of the read.
    registered_ = true;
    std::set<std::pair<uintptr_t, uint64_t>> storages;
    for (const LocalTensor& local : plan_->local()) {
      if (local.nbytes == 0 || !storages.insert({local.storageAddress, local.storageLength}).second) continue;
      acquired_.push_back(agent.acquire(local.storageAddress, local.storageLength, local.mem, local.device));
    }
  }
  const std::vector<Span>& spans = plan_->spans();
  if (spans.empty()) return true;
  if (!begun_) {
    if (aborted_->load()) throw Failure(FailureCode::Aborted, "the read was aborted before it started");
    begun_ = agent.beginTransfer(plan_->agent(), plan_->blob(), plan_->epoch(), plan_->regions(), plan_->descs(), mayWait);
    if (!begun_) return false;
  }
  while (current_ != nullptr || next_ < spans.size()) {
    if (current_ == nullptr) {
      // One request per pair of memory kinds (a NIXL descriptor list holds one kind).
      size_t count = 1;
      while (next_ + count < spans.size() && spans[next_ + count].localMem == spans[next_].localMem &&
             spans[next_ + count].remoteMem == spans[next_].remoteMem) {
        count++;
      }
      current_ = post(agent.handle(), next_, count);
      next_ += count;
    }
    if (current_->status == NIXL_CAPI_IN_PROG) {
      if (!mayWait) return false;
      await(*current_);
    }
    if (current_->status != NIXL_CAPI_SUCCESS) {
      throw Failure(FailureCode::Transfer, "the NIXL READ from " + plan_->agent() + " failed (status " + std::to_string(current_->status) +
                                               "): the producer died or its memory became unreachable");
    }
    current_.reset();
  }
  return true;
}

std::unique_ptr<ReadJob::Request> ReadJob::post(nixl_capi_agent_t agent, size_t first, size_t count) {
  NixlLibrary& nixl = NixlLibrary::get();
  const std::vector<Span>& spans = plan_->spans();
  auto request = std::unique_ptr<Request>(new Request{nixl, agent});
  int status = nixl.createXferDlist(spans[first].localMem, &request->local);
  if (status == NIXL_CAPI_SUCCESS) status = nixl.createXferDlist(spans[first].remoteMem, &request->remote);
  for (size_t i = first; i < first + count && status == NIXL_CAPI_SUCCESS; i++) {
    status = nixl.xferDlistAddDesc(request->local, spans[i].local, spans[i].length, spans[i].localDevice);
    if (status == NIXL_CAPI_SUCCESS) status = nixl.xferDlistAddDesc(request->remote, spans[i].remote, spans[i].length, spans[i].remoteDevice);
  }
  if (status != NIXL_CAPI_SUCCESS) throw Failure(FailureCode::Transfer, "NIXL cannot build descriptor lists: status " + std::to_string(status));
  status = nixl.createXferReq(agent, NIXL_CAPI_XFER_OP_READ, request->local, request->remote, plan_->agent().c_str(), &request->request, nullptr);
  if (status != NIXL_CAPI_SUCCESS) {
    throw Failure(FailureCode::Transfer, "NIXL cannot prepare a READ from " + plan_->agent() + " (status " + std::to_string(status) +
                                             "): the producer is unreachable or its memory is gone");
  }
  request->status = nixl.postXferReq(agent, request->request, nullptr);
  return request;
}

void ReadJob::await(Request& request) {
  NixlLibrary& nixl = NixlLibrary::get();
  Backoff backoff;
  while (request.status == NIXL_CAPI_IN_PROG) {
    if (aborted_->load()) {
      // Releasing an in-flight request cancels it in UCX; if NIXL refuses, the read continues into
      // memory we still hold, and we wait for its end before letting the buffers go.
      if (nixl.releaseXferReq(request.agent, request.request) == NIXL_CAPI_SUCCESS) {
        request.released = true;
        throw Failure(FailureCode::Aborted, "the READ from " + plan_->agent() + " was aborted");
      }
      while (nixl.getXferStatus(request.agent, request.request) == NIXL_CAPI_IN_PROG) backoff.pause();
      throw Failure(FailureCode::Aborted, "the READ from " + plan_->agent() + " was aborted");
    }
    backoff.pause();
    request.status = nixl.getXferStatus(request.agent, request.request);
  }
}

void ReadJob::abandon() {
  // A request posted here may still be writing into the buffers: abort it and wait for that.
  aborted_->store(true);
  try {
    if (current_ != nullptr) await(*current_);
  } catch (const Failure&) {
    // The abort's own failure: what stopped the read from going on is what to report.
  }
  end();
  if (settler_ != nullptr) settler_->cancel();
}

void ReadJob::end() {
  ProcessAgent& agent = ProcessAgent::instance();
  current_.reset();
  if (begun_) {
    agent.endTransfer(plan_->agent());
    // A failed peer leaves a broken endpoint behind: the next object from it reconnects.
    if (failure_.has_value() && failure_->code() == FailureCode::Transfer) agent.forgetRemote(plan_->agent());
  }
  for (const auto& key : acquired_) {
    try {
      agent.release(key);
    } catch (const Failure&) {
      // Deregistering a transient destination cannot fail the read that already landed.
    }
  }
  acquired_.clear();
}

void ReadJob::settle(Napi::Env env, Napi::Promise::Deferred& deferred) {
  if (failure_.has_value()) {
    deferred.Reject(failure_->toError(env).Value());
  } else {
    deferred.Resolve(env.Undefined());
  }
  keep_.Reset();
}

}  // namespace tensorlane::nixl
