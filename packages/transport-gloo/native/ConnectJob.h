#pragma once

#include "Job.h"

#include <vector>

namespace tlgloo {

// Connects every pair of a group to the addresses its peers made for this rank.
class ConnectJob : public Job {
 public:
  ConnectJob(Napi::Env env, std::shared_ptr<GroupState> group, std::vector<std::vector<char>> addresses);

 protected:
  void run() override;

 private:
  std::vector<std::vector<char>> addresses_;
};

}  // namespace tlgloo
