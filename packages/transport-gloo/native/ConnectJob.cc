#include "ConnectJob.h"

namespace tensorlane::gloo {

ConnectJob::ConnectJob(Napi::Env env, std::shared_ptr<GroupState> group, GroupState::Rendezvous rendezvous)
    // The connect timeout is the context's own; the job's deadline is unused.
    : Job(env, std::move(group), {}, std::chrono::milliseconds(0)), rendezvous_(std::move(rendezvous)) {}

void ConnectJob::run() {
  group().connect(rendezvous_);
}

}  // namespace tensorlane::gloo
