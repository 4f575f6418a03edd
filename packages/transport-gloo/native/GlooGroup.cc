#include "GlooGroup.h"

#include "CollectiveJob.h"
#include "ConnectJob.h"
#include "GroupRegistry.h"
#include "ReceiveJob.h"
#include "SendJob.h"

#include <tensorlane/Arguments.h>

#include <string>

#include <sys/resource.h>

namespace tensorlane::gloo {

namespace {

[[noreturn]] void usage(const std::string& message) {
  throw Failure(FailureCode::Usage, message);
}

// A rank, a peer or a group size.
int rankArg(const Napi::CallbackInfo& info, size_t index, const char* name) {
  return static_cast<int>(integerArg(info[index], name, 0, 1 << 20));
}

// Each rank opens a connection to every other: a group larger than the process may open files fails
// now, instead of after minutes of connecting and closing pairs on the JS thread.
void checkOpenFiles(int size) {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  // Room for what the process has open besides the group's connections.
  constexpr rlim_t kReserve = 64;
  // Gloo's pair holds three descriptors from its construction (a group of 50 ranks: 147).
  const rlim_t descriptors = 3 * static_cast<rlim_t>(size - 1);
  if (descriptors + kReserve > limit.rlim_cur) {
    usage("a gloo group of " + std::to_string(size) + " ranks takes up to " + std::to_string(descriptors) + " descriptors in each rank's process, which may open " +
          std::to_string(limit.rlim_cur) + " files (ulimit -n): raise that limit, or make smaller groups");
  }
}

// options.deviceCpusByRank: whether this rank's device thread (if this group opens the device) takes
// the rank's share of the process's CPUs (Device::shared).
bool deviceCpusByRankArg(const Napi::CallbackInfo& info, size_t index) {
  if (info[index].IsUndefined()) return false;
  if (!info[index].IsObject()) usage("options must be an object");
  const Napi::Value value = info[index].As<Napi::Object>().Get("deviceCpusByRank");
  if (value.IsUndefined()) return false;
  if (!value.IsBoolean()) usage("options.deviceCpusByRank must be a boolean");
  return value.As<Napi::Boolean>().Value();
}

// Checked in full before anything is pinned, so that a bad argument leaves no reference behind.
std::vector<Napi::Uint8Array> buffersArg(const Napi::CallbackInfo& info, size_t index) {
  if (!info[index].IsArray()) usage("buffers must be an array of Uint8Array");
  Napi::Array array = info[index].As<Napi::Array>();
  std::vector<Napi::Uint8Array> buffers;
  for (uint32_t i = 0; i < array.Length(); i++) buffers.push_back(bytesArg(array.Get(i), "buffers[" + std::to_string(i) + "]"));
  return buffers;
}

/** A collective's buffers: as many as its block of tags has room for, after the ranks' comparison. */
std::vector<Napi::Uint8Array> collectiveBuffersArg(const Napi::CallbackInfo& info, size_t index) {
  auto buffers = buffersArg(info, index);
  if (buffers.size() >= GroupState::kTagsPerCollective) {
    usage("a collective takes at most " + std::to_string(GroupState::kTagsPerCollective - 1) + " tensors, not " + std::to_string(buffers.size()));
  }
  return buffers;
}

std::vector<PinnedBytes> pin(const std::vector<Napi::Uint8Array>& buffers) {
  std::vector<PinnedBytes> pinned;
  for (const auto& b : buffers) pinned.emplace_back(b);
  return pinned;
}

}  // namespace

Napi::Function GlooGroup::Define(Napi::Env env) {
  return DefineClass(env, "Group",
                     {
                         InstanceAccessor<&GlooGroup::Rank>("rank"),
                         InstanceAccessor<&GlooGroup::Size>("size"),
                         InstanceAccessor<&GlooGroup::Broken>("broken"),
                         InstanceAccessor<&GlooGroup::Stranded>("stranded"),
                         InstanceAccessor<&GlooGroup::SendBuffers>("sendBuffers"),
                         InstanceMethod<&GlooGroup::Address>("address"),
                         InstanceMethod<&GlooGroup::Connect>("connect"),
                         InstanceMethod<&GlooGroup::Send>("send"),
                         InstanceMethod<&GlooGroup::Receive>("receive"),
                         InstanceMethod<&GlooGroup::Allreduce>("allreduce"),
                         InstanceMethod<&GlooGroup::Broadcast>("broadcast"),
                         InstanceMethod<&GlooGroup::Refuse>("refuse"),
                         InstanceMethod<&GlooGroup::Destroy>("destroy"),
                         InstanceMethod<&GlooGroup::Sweep>("sweep"),
                         InstanceMethod<&GlooGroup::Publish>("publish"),
                         StaticMethod<&GlooGroup::Attach>("attach"),
                         StaticMethod<&GlooGroup::Published>("published"),
                     });
}

GlooGroup::GlooGroup(const Napi::CallbackInfo& info) : Napi::ObjectWrap<GlooGroup>(info) {
  if (info.Length() == 1 && info[0].IsExternal()) {
    // From Attach: the published group's state, shared.
    state_ = *info[0].As<Napi::External<std::shared_ptr<GroupState>>>().Data();
    attached_ = true;
    return;
  }
  guarded(info.Env(), [&]() -> Napi::Value {
    const int rank = rankArg(info, 0, "rank");
    const int size = rankArg(info, 1, "size");
    if (size < 1 || rank >= size) usage("rank " + std::to_string(rank) + " is not in a group of " + std::to_string(size));
    checkOpenFiles(size);
    state_ = std::make_shared<GroupState>(rank, size, timeoutArg(info[2]), deviceCpusByRankArg(info, 3));
    return info.Env().Undefined();
  });
}

GlooGroup::~GlooGroup() {
  if (state_ == nullptr || attached_) return;
  // Run by the wrapper's finalizer, where an exception (gloo's, from closing a pair) would leave a
  // noexcept destructor and abort the process, and no caller is left to tell: what the close did
  // not get to stays held, as by a failed destroy().
  try {
    if (!name_.empty()) GroupRegistry::withdraw(name_, state_.get());
    state_->close();
  } catch (const std::exception&) {
  }
}

Napi::Value GlooGroup::Rank(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), state_->rank());
}

Napi::Value GlooGroup::Size(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), state_->size());
}

Napi::Value GlooGroup::Broken(const Napi::CallbackInfo& info) {
  const std::string reason = state_->brokenReason();
  return reason.empty() ? info.Env().Undefined() : Napi::String::New(info.Env(), reason);
}

Napi::Value GlooGroup::Stranded(const Napi::CallbackInfo& info) {
  const GroupState::Stranded stranded = state_->stranded();
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("operations", Napi::Number::New(info.Env(), static_cast<double>(stranded.operations)));
  out.Set("bytes", Napi::Number::New(info.Env(), static_cast<double>(stranded.bytes)));
  return out;
}

Napi::Value GlooGroup::SendBuffers(const Napi::CallbackInfo& info) {
  const std::vector<int> bytes = state_->sendBuffers();
  Napi::Array out = Napi::Array::New(info.Env(), bytes.size());
  for (size_t peer = 0; peer < bytes.size(); peer++) {
    out.Set(peer, bytes[peer] < 0 ? info.Env().Undefined() : Napi::Number::New(info.Env(), bytes[peer]));
  }
  return out;
}

Napi::Value GlooGroup::Address(const Napi::CallbackInfo& info) {
  const auto& blob = state_->blob();
  Napi::Uint8Array out = Napi::Uint8Array::New(info.Env(), blob.size());
  std::copy(blob.begin(), blob.end(), out.Data());
  return out;
}

Napi::Value GlooGroup::Connect(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    if (!info[0].IsArray()) usage("connect() takes the array of every rank's address blob");
    Napi::Array array = info[0].As<Napi::Array>();
    std::vector<std::vector<uint8_t>> blobs;
    for (uint32_t i = 0; i < array.Length(); i++) {
      Napi::Uint8Array bytes = bytesArg(array.Get(i), "the address blob of rank " + std::to_string(i), FailureCode::Protocol);
      blobs.emplace_back(bytes.Data(), bytes.Data() + bytes.ByteLength());
    }
    auto job = std::make_shared<ConnectJob>(info.Env(), state_, state_->rendezvous(blobs));
    return job->start(info.Env()).Get("promise");
  });
}

Napi::Value GlooGroup::Transfer(const Napi::CallbackInfo& info, bool sending) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    const int peer = rankArg(info, 0, "peer");
    if (peer >= state_->size() || peer == state_->rank()) {
      usage("rank " + std::to_string(peer) + " is not a peer of rank " + std::to_string(state_->rank()) + " in a group of " +
            std::to_string(state_->size()));
    }
    const std::string objectId = stringArg(info[1], "objectId");
    const auto buffers = buffersArg(info, 2);
    const auto timeout = timeoutArg(info[3]);
    std::vector<PinnedBytes> memory = pin(buffers);
    std::shared_ptr<Job> job;
    if (sending) job = std::make_shared<SendJob>(info.Env(), state_, std::move(memory), timeout, peer, objectId);
    else job = std::make_shared<ReceiveJob>(info.Env(), state_, std::move(memory), timeout, peer, objectId);
    return job->start(info.Env());
  });
}

Napi::Value GlooGroup::Send(const Napi::CallbackInfo& info) {
  return Transfer(info, true);
}

Napi::Value GlooGroup::Receive(const Napi::CallbackInfo& info) {
  return Transfer(info, false);
}

// A collective's block of tags is taken before any check that one rank may fail alone: a rank that
// refuses its part still takes part, with a "refused" header (startRefusal), so that every rank's
// next collective takes the same block and the others fail at once instead of waiting for it.
// `check` reads the arguments into `spec` and returns the buffers.
Napi::Value GlooGroup::Collective(Napi::Env env, CollectiveJob::Kind kind, std::chrono::milliseconds timeout,
                                  const std::function<std::vector<Napi::Uint8Array>(CollectiveJob::Spec&)>& check) {
  CollectiveJob::Spec spec{kind, {}, CollectiveJob::Op::Sum, 0, state_->takeTags()};
  std::vector<Napi::Uint8Array> buffers;
  try {
    buffers = check(spec);
  } catch (const Failure&) {
    startRefusal(env, spec.firstTag, timeout);
    throw;
  }
  auto job = std::make_shared<CollectiveJob>(env, state_, pin(buffers), timeout, std::move(spec));
  return job->start(env);
}

Napi::Value GlooGroup::Allreduce(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    return Collective(info.Env(), CollectiveJob::Kind::Allreduce, timeoutArg(info[3]), [&](CollectiveJob::Spec& spec) {
      auto buffers = collectiveBuffersArg(info, 0);
      if (!info[1].IsArray() || info[1].As<Napi::Array>().Length() != buffers.size()) usage("dtypes must name the dtype of every buffer");
      Napi::Array dtypes = info[1].As<Napi::Array>();
      for (uint32_t i = 0; i < dtypes.Length(); i++) {
        const std::string dtype = dtypes.Get(i).ToString().Utf8Value();
        if (!CollectiveJob::reducible(dtype)) throw Failure(FailureCode::DType, "gloo cannot reduce " + dtype);
        if (buffers[i].ByteLength() % CollectiveJob::itemSize(dtype) != 0) {
          usage("buffers[" + std::to_string(i) + "] is not a whole number of " + dtype + " elements");
        }
        spec.dtypes.push_back(dtype);
      }
      const std::string op = info[2].ToString().Utf8Value();
      if (op == "sum") spec.op = CollectiveJob::Op::Sum;
      else if (op == "product") spec.op = CollectiveJob::Op::Product;
      else if (op == "min") spec.op = CollectiveJob::Op::Min;
      else if (op == "max") spec.op = CollectiveJob::Op::Max;
      else usage("unknown reduce op \"" + op + "\"");
      return buffers;
    });
  });
}

Napi::Value GlooGroup::Broadcast(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    return Collective(info.Env(), CollectiveJob::Kind::Broadcast, timeoutArg(info[2]), [&](CollectiveJob::Spec& spec) {
      auto buffers = collectiveBuffersArg(info, 0);
      spec.root = rankArg(info, 1, "root");
      if (spec.root >= state_->size()) usage("root " + std::to_string(spec.root) + " is not a rank of a group of " + std::to_string(state_->size()));
      return buffers;
    });
  });
}

Napi::Value GlooGroup::Refuse(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    const auto timeout = timeoutArg(info[0]);
    startRefusal(info.Env(), state_->takeTags(), timeout);
    return info.Env().Undefined();
  });
}

void GlooGroup::startRefusal(Napi::Env env, uint32_t firstTag, std::chrono::milliseconds timeout) {
  try {
    CollectiveJob::Spec spec{CollectiveJob::Kind::Refused, {}, CollectiveJob::Op::Sum, 0, firstTag};
    auto job = std::make_shared<CollectiveJob>(env, state_, std::vector<PinnedBytes>{}, timeout, std::move(spec));
    Napi::Object handle = job->start(env);
    // Nobody awaits it: the refusal this rank reports is its own error; its peers report theirs.
    Napi::Object promise = handle.Get("promise").As<Napi::Object>();
    promise.Get("catch").As<Napi::Function>().Call(promise, {Napi::Function::New(env, [](const Napi::CallbackInfo&) {})});
  } catch (const std::exception&) {
    // No thread for it (or the group is gone): the refusal itself is still what the caller hears of.
  }
}

Napi::Value GlooGroup::Destroy(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    if (attached_) usage("destroy() belongs to the environment that created the group");
    if (!name_.empty()) GroupRegistry::withdraw(name_, state_.get());
    state_->close();
    return info.Env().Undefined();
  });
}

Napi::Value GlooGroup::Sweep(const Napi::CallbackInfo& info) {
  state_->sweep();
  return info.Env().Undefined();
}

Napi::Value GlooGroup::Publish(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    const std::string name = stringArg(info[0], "the group's name");
    if (attached_) usage("publish() belongs to the environment that created the group");
    name_ = name;
    GroupRegistry::publish(name_, state_);
    return info.Env().Undefined();
  });
}

Napi::Value GlooGroup::Attach(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    std::shared_ptr<GroupState> state = GroupRegistry::find(stringArg(info[0], "the group's name"));
    if (state == nullptr) return info.Env().Undefined();
    // The External lives only for this call: the constructor copies the shared pointer out of it.
    auto external = Napi::External<std::shared_ptr<GroupState>>::New(info.Env(), &state);
    return info.This().As<Napi::Function>().New({external});
  });
}

Napi::Value GlooGroup::Published(const Napi::CallbackInfo& info) {
  const std::vector<std::string> names = GroupRegistry::names();
  Napi::Array out = Napi::Array::New(info.Env(), names.size());
  for (size_t i = 0; i < names.size(); i++) out.Set(static_cast<uint32_t>(i), Napi::String::New(info.Env(), names[i]));
  return out;
}

}  // namespace tensorlane::gloo
