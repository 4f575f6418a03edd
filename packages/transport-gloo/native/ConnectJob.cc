#include "ConnectJob.h"

namespace tlgloo {

ConnectJob::ConnectJob(Napi::Env env, std::shared_ptr<GroupState> group, std::vector<std::vector<char>> addresses)
    // The connect timeout is the context's own; the job's deadline is unused.
    : Job(env, std::move(group), {}, std::chrono::milliseconds(0)), addresses_(std::move(addresses)) {}

void ConnectJob::run() {
  group().connect(addresses_);
}

}  // namespace tlgloo
