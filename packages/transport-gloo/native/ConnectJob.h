#pragma once

#include "Job.h"

namespace tensorlane::gloo {

// Connects every pair of a group to the address its peer made for this rank, each end proving itself.
class ConnectJob : public Job {
 public:
  ConnectJob(Napi::Env env, std::shared_ptr<GroupState> group, GroupState::Rendezvous rendezvous);

 protected:
  void run() override;

 private:
  const GroupState::Rendezvous rendezvous_;
};

}  // namespace tensorlane::gloo
