// Settles a JS promise from a native thread: made on the JS thread that asked, handed the result
// by whichever thread computed it, resolved on the asking thread through a thread-safe function
// (main thread or worker alike).
#pragma once

#include "Failure.h"

#include <napi.h>

#include <cstdint>
#include <memory>
#include <optional>

namespace tlnccl {

class Settler : public std::enable_shared_from_this<Settler> {
 public:
  static std::shared_ptr<Settler> create(Napi::Env env);

  Napi::Promise promise() const { return deferred_.Promise(); }

  /** Any thread, once: resolves with undefined, or with `value` as a BigInt. */
  void resolve(std::optional<uint64_t> value = std::nullopt);
  /** Any thread, once. */
  void reject(const Failure& failure);

 private:
  explicit Settler(Napi::Env env);
  void settle();

  Napi::Promise::Deferred deferred_;
  Napi::ThreadSafeFunction tsfn_;
  std::optional<uint64_t> value_;
  std::optional<Failure> failure_;
};

}  // namespace tlnccl
