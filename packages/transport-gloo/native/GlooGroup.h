#pragma once

#include "CollectiveJob.h"
#include "GroupState.h"

#include <napi.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tensorlane::gloo {

// The JS class `Group`: one rank's membership of a gloo group (see src/AddonTypes.ts for its surface).
class GlooGroup : public Napi::ObjectWrap<GlooGroup> {
 public:
  static Napi::Function Define(Napi::Env env);

  explicit GlooGroup(const Napi::CallbackInfo& info);
  ~GlooGroup() override;

 private:
  Napi::Value Rank(const Napi::CallbackInfo& info);
  Napi::Value Size(const Napi::CallbackInfo& info);
  Napi::Value Broken(const Napi::CallbackInfo& info);
  Napi::Value Stranded(const Napi::CallbackInfo& info);
  Napi::Value SendBuffers(const Napi::CallbackInfo& info);
  Napi::Value Address(const Napi::CallbackInfo& info);
  Napi::Value Connect(const Napi::CallbackInfo& info);
  Napi::Value Send(const Napi::CallbackInfo& info);
  Napi::Value Receive(const Napi::CallbackInfo& info);
  Napi::Value Allreduce(const Napi::CallbackInfo& info);
  Napi::Value Broadcast(const Napi::CallbackInfo& info);
  // Takes part in the next collective as a rank that refused it (see Allreduce).
  Napi::Value Refuse(const Napi::CallbackInfo& info);
  Napi::Value Destroy(const Napi::CallbackInfo& info);
  Napi::Value Sweep(const Napi::CallbackInfo& info);
  Napi::Value Publish(const Napi::CallbackInfo& info);
  static Napi::Value Attach(const Napi::CallbackInfo& info);
  static Napi::Value Published(const Napi::CallbackInfo& info);

  Napi::Value Transfer(const Napi::CallbackInfo& info, bool sending);
  Napi::Value Collective(Napi::Env env, CollectiveJob::Kind kind, std::chrono::milliseconds timeout,
                         const std::function<std::vector<Napi::Uint8Array>(CollectiveJob::Spec&)>& check);
  void startRefusal(Napi::Env env, uint32_t firstTag, std::chrono::milliseconds timeout);

  std::shared_ptr<GroupState> state_;
  // A wrapper made by Group.attach(name) in another environment: it never closes the group.
  bool attached_ = false;
  // The name the group is published under, once published.
  std::string name_;
};

}  // namespace tensorlane::gloo
