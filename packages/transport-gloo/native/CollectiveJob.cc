#include "CollectiveJob.h"

#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>

#include <cstdint>

namespace tensorlane::gloo {

namespace {

using ReduceFunction = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFunction reduceFunction(CollectiveJob::Op op) {
  switch (op) {
    case CollectiveJob::Op::Sum: return &::gloo::sum<T>;
    case CollectiveJob::Op::Product: return &::gloo::product<T>;
    case CollectiveJob::Op::Min: return &::gloo::min<T>;
    case CollectiveJob::Op::Max: return &::gloo::max<T>;
  }
  return &::gloo::sum<T>;
}

template <typename T>
void allreduceAs(const std::shared_ptr<::gloo::Context>& context, char* data, size_t bytes, CollectiveJob::Op op, uint32_t tag,
                 std::chrono::milliseconds timeout) {
  ::gloo::AllreduceOptions options(context);
  options.setOutput(reinterpret_cast<T*>(data), bytes / sizeof(T));
  options.setReduceFunction(reduceFunction<T>(op));
  options.setTag(tag);
  options.setTimeout(timeout);
  ::gloo::allreduce(options);
}

struct DTypeEntry {
  const char* name;
  size_t itemSize;
  void (*allreduce)(const std::shared_ptr<::gloo::Context>&, char*, size_t, CollectiveJob::Op, uint32_t, std::chrono::milliseconds);
};

const DTypeEntry kDTypes[] = {
    {"float32", 4, &allreduceAs<float>},     {"float64", 8, &allreduceAs<double>},    {"float16", 2, &allreduceAs<::gloo::float16>},
    {"int8", 1, &allreduceAs<int8_t>},       {"int16", 2, &allreduceAs<int16_t>},     {"int32", 4, &allreduceAs<int32_t>},
    {"int64", 8, &allreduceAs<int64_t>},     {"uint8", 1, &allreduceAs<uint8_t>},     {"uint16", 2, &allreduceAs<uint16_t>},
    {"uint32", 4, &allreduceAs<uint32_t>},   {"uint64", 8, &allreduceAs<uint64_t>},
};

const DTypeEntry* find(const std::string& dtype) {
  for (const auto& entry : kDTypes) {
    if (dtype == entry.name) return &entry;
  }
  return nullptr;
}

}  // namespace

bool CollectiveJob::reducible(const std::string& dtype) {
  return find(dtype) != nullptr;
}

size_t CollectiveJob::itemSize(const std::string& dtype) {
  const DTypeEntry* entry = find(dtype);
  return entry == nullptr ? 1 : entry->itemSize;
}

CollectiveJob::CollectiveJob(Napi::Env env, std::shared_ptr<GroupState> group, std::vector<PinnedBytes> memory,
                             std::chrono::milliseconds timeout, Spec spec)
    : Job(env, std::move(group), std::move(memory), timeout), spec_(std::move(spec)) {}

void CollectiveJob::run() {
  auto context = group().context();
  for (size_t i = 0; i < memory().size(); i++) {
    if (aborted()) throw Failure(FailureCode::Aborted, "aborted");
    const PinnedBytes& m = memory()[i];
    // Every rank holds tensors of the same shapes, so every rank skips the same empty ones.
    if (m.size() == 0) continue;
    const uint32_t tag = spec_.firstTag + static_cast<uint32_t>(i);
    if (spec_.kind == Kind::Allreduce) {
      find(spec_.dtypes[i])->allreduce(context, m.data(), m.size(), spec_.op, tag, remaining());
    } else {
      ::gloo::BroadcastOptions options(context);
      options.setOutput(reinterpret_cast<uint8_t*>(m.data()), m.size());
      options.setRoot(spec_.root);
      options.setTag(tag);
      options.setTimeout(remaining());
      ::gloo::broadcast(options);
    }
  }
}

void CollectiveJob::onAbort() {
  group().markBroken("a collective was abandoned midway (aborted or timed out by the runtime), so the ranks may disagree on its state");
}

}  // namespace tensorlane::gloo
