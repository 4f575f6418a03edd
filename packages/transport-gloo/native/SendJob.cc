#include "SendJob.h"

#include "ObjectHeader.h"
#include "TransferKey.h"

namespace tlgloo {

void SendJob::run() {
  auto context = group().context();
  const TransferKey key(objectId());
  const std::vector<size_t> lengths = this->lengths();
  auto header = std::make_shared<ObjectHeader>(key.value(), lengths);
  own(header);
  // gloo reads from the buffer of a send; it never writes into it.
  auto& announced = track(context->createUnboundBuffer(const_cast<char*>(header->bytes().data()), ObjectHeader::kSize), Direction::Send);
  announced.send(peer(), key.headerSlot());
  // All sends are posted at once: each leaves as soon as the consumer has posted its receive.
  for (size_t i = 0; i < memory().size(); i++) {
    if (lengths[i] == 0) continue;
    auto& data = track(context->createUnboundBuffer(memory()[i].data(), lengths[i]), Direction::Send);
    data.send(peer(), key.dataSlot(i));
  }
  waitAll();
}

}  // namespace tlgloo
