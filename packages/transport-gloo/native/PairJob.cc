#include "PairJob.h"

namespace tensorlane::gloo {

PairJob::PairJob(Napi::Env env, std::shared_ptr<GroupState> group, std::vector<PinnedBytes> memory, std::chrono::milliseconds timeout,
                 int peer, std::string objectId)
    : Job(env, std::move(group), std::move(memory), timeout), peer_(peer), objectId_(std::move(objectId)) {}

std::vector<size_t> PairJob::lengths() const {
  std::vector<size_t> lengths;
  for (const auto& m : memory()) lengths.push_back(m.size());
  return lengths;
}

}  // namespace tensorlane::gloo
