#include "SendJob.h"

#include "ObjectHeader.h"
#include "TransferKey.h"

namespace tensorlane::gloo {

void SendJob::run() {
  auto context = group().context();
  const TransferKey key(objectId());
  const std::vector<size_t> lengths = this->lengths();
  const ObjectHeader header(key.value(), lengths);
  // The header's message, with the object's bytes right behind it when they are few (ObjectHeader).
  auto message = std::make_shared<std::vector<char>>(header.bytes().begin(), header.bytes().end());
  if (header.inlined()) {
    message->reserve(ObjectHeader::kSize + header.total());
    for (size_t i = 0; i < memory().size(); i++) message->insert(message->end(), memory()[i].data(), memory()[i].data() + lengths[i]);
  }
  own(message);
  track(context->createUnboundBuffer(message->data(), message->size()), Direction::Send, peer()).send(peer(), key.headerSlot());
  if (!header.inlined()) {
    // All sends are posted at once: each leaves as soon as the consumer has posted its receive.
    for (size_t i = 0; i < memory().size(); i++) {
      if (lengths[i] == 0) continue;
      track(context->createUnboundBuffer(memory()[i].data(), lengths[i]), Direction::Send, peer()).send(peer(), key.dataSlot(i));
    }
  }
  waitAll();
}

}  // namespace tensorlane::gloo
