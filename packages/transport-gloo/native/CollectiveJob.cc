#include "CollectiveJob.h"

#include "TransferKey.h"

#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>

#include <array>
#include <cstdint>
#include <string>

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

namespace {

std::string describe(const CollectiveJob::Header& h) {
  return std::to_string(h[2]) + " tensor" + (h[2] == 1 ? "" : "s") + " of " + std::to_string(h[3]) + " bytes";
}

}  // namespace

void CollectiveJob::post() {
  const auto context = group().context();
  headers_ = std::make_shared<std::vector<Header>>(static_cast<size_t>(context->size));
  own(headers_);
  Header& mine = (*headers_)[static_cast<size_t>(context->rank)];
  mine = {static_cast<uint64_t>(spec_.kind), spec_.kind == Kind::Allreduce ? static_cast<uint64_t>(spec_.op) : static_cast<uint64_t>(spec_.root),
          memory().size(), 0, 14695981039346656037ull};
  const auto mix = [&mine](uint64_t value) {
    for (int b = 0; b < 8; b++) mine[4] = (mine[4] ^ ((value >> (8 * b)) & 0xff)) * 1099511628211ull;
  };
  for (size_t i = 0; i < memory().size(); i++) {
    mine[3] += memory()[i].size();
    mix(memory()[i].size());
    if (spec_.kind == Kind::Allreduce) {
      for (char c : spec_.dtypes[i]) mix(static_cast<unsigned char>(c));
    }
  }
  // Tracked: a peer that never answers leaves these posted, and the group keeps their memory until it closes.
  const uint64_t slot = TransferKey::agreementSlot(spec_.firstTag);
  for (int peer = 0; peer < context->size; peer++) {
    if (peer == context->rank) continue;
    track(context->createUnboundBuffer(&(*headers_)[static_cast<size_t>(peer)], sizeof(Header)), Direction::Recv, peer).recv(peer, slot);
    track(context->createUnboundBuffer(&mine, sizeof(Header)), Direction::Send, peer).send(peer, slot);
  }
}

void CollectiveJob::agree(const ::gloo::Context& context) {
  try {
    waitAll();
  } catch (const Failure& failure) {
    // The group's close ends the waits: that is what happened, as with gloo's own calls.
    if (failure.code() == FailureCode::Aborted && group().closed()) throw Failure(FailureCode::Closed, "the group was destroyed");
    throw;
  }
  // A refusing rank reports its own error; it only had to take part.
  if (spec_.kind == Kind::Refused) return;
  const Header& mine = (*headers_)[static_cast<size_t>(context.rank)];
  for (int rank = 0; rank < context.size; rank++) {
    const Header& theirs = (*headers_)[static_cast<size_t>(rank)];
    if (theirs == mine) continue;
    const std::string what = spec_.kind == Kind::Allreduce ? "allreduce" : "broadcast";
    const std::string other = "rank " + std::to_string(rank);
    std::string why;
    if (theirs[0] == static_cast<uint64_t>(Kind::Refused)) why = other + " refused its part (its own error says why)";
    else if (theirs[0] != mine[0]) why = other + " runs another collective at this point";
    else if (theirs[1] != mine[1]) why = other + (spec_.kind == Kind::Allreduce ? " reduces with another op" : " names another root");
    else if (theirs[2] != mine[2] || theirs[3] != mine[3]) why = other + " passes " + describe(theirs) + ", rank " + std::to_string(context.rank) + " " + describe(mine);
    else why = other + " passes tensors of other sizes or dtypes than rank " + std::to_string(context.rank);
    // Every rank saw every header: each fails alike, and the group goes on in step.
    throw Failure(FailureCode::Shape, "the ranks of the " + what + " disagree: " + why + "; every rank must pass tensors of the same shapes and dtypes, the same op and root");
  }
}

void CollectiveJob::run() {
  auto context = group().context();
  // Gloo ends the process when a rank's buffer differs in size from its peer's: the ranks compare what they pass first.
  agree(*context);
  for (size_t i = 0; i < memory().size(); i++) {
    if (aborted()) throw Failure(FailureCode::Aborted, "aborted");
    const PinnedBytes& m = memory()[i];
    // Every rank holds tensors of the same shapes, so every rank skips the same empty ones.
    if (m.size() == 0) continue;
    const uint32_t tag = spec_.firstTag + 1 + static_cast<uint32_t>(i);
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
