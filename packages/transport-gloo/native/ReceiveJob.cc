#include "ReceiveJob.h"

#include "ObjectHeader.h"
#include "TransferKey.h"

#include <cstring>

namespace tensorlane::gloo {

void ReceiveJob::post() {
  // Room for the largest inline payload, whatever this side expects: a longer message than the
  // receive would abort the process inside gloo.
  announced_ = std::make_shared<std::vector<char>>(ObjectHeader::kSize + ObjectHeader::kInlineMax);
  own(announced_);
  track(group().context()->createUnboundBuffer(announced_->data(), announced_->size()), Direction::Recv, peer())
      .recv(peer(), TransferKey(objectId()).headerSlot());
}

void ReceiveJob::run() {
  auto context = group().context();
  const TransferKey key(objectId());
  const std::vector<size_t> lengths = this->lengths();
  const ObjectHeader expected(key.value(), lengths);
  waitAll();
  expected.check(announced_->data(), objectId());
  if (expected.inlined()) {
    const char* payload = announced_->data() + ObjectHeader::kSize;
    for (size_t i = 0; i < memory().size(); i++) {
      if (lengths[i] == 0) continue;
      std::memcpy(memory()[i].data(), payload, lengths[i]);
      payload += lengths[i];
    }
    return;
  }
  for (size_t i = 0; i < memory().size(); i++) {
    if (lengths[i] == 0) continue;
    track(context->createUnboundBuffer(memory()[i].data(), lengths[i]), Direction::Recv, peer()).recv(peer(), key.dataSlot(i));
  }
  waitAll();
}

}  // namespace tensorlane::gloo
