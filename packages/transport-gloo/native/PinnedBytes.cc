#include "PinnedBytes.h"

namespace tensorlane::gloo {

PinnedBytes::PinnedBytes(Napi::Uint8Array array)
    : data_(reinterpret_cast<char*>(array.Data())), size_(array.ByteLength()), env_(array.Env()), ref_(nullptr) {
  NAPI_THROW_IF_FAILED_VOID(env_, napi_create_reference(env_, array, 1, &ref_));
}

PinnedBytes::PinnedBytes(PinnedBytes&& other) noexcept
    : data_(other.data_), size_(other.size_), env_(other.env_), ref_(other.ref_) {
  other.ref_ = nullptr;
}

void PinnedBytes::release() {
  if (ref_ == nullptr) return;
  napi_delete_reference(env_, ref_);
  ref_ = nullptr;
}

}  // namespace tensorlane::gloo
