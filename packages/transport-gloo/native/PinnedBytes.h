#pragma once

#include <napi.h>

#include <cstddef>

namespace tensorlane::gloo {

// Tensor memory handed to native threads without a copy: the address of a Uint8Array's bytes and a
// reference that keeps its (Shared)ArrayBuffer alive. Created and released on the JS thread only;
// one that is never released (its environment is torn down first) leaks its reference on purpose,
// since deleting it from another thread is not allowed.
class PinnedBytes {
 public:
  explicit PinnedBytes(Napi::Uint8Array array);
  PinnedBytes(PinnedBytes&& other) noexcept;
  PinnedBytes& operator=(PinnedBytes&& other) = delete;
  PinnedBytes(const PinnedBytes&) = delete;
  PinnedBytes& operator=(const PinnedBytes&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }

  // JS thread only.
  void release();

 private:
  char* data_;
  size_t size_;
  napi_env env_;
  napi_ref ref_;
};

}  // namespace tensorlane::gloo
