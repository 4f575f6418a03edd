#include "ReceiveJob.h"

#include "ObjectHeader.h"
#include "TransferKey.h"

namespace tlgloo {

void ReceiveJob::run() {
  auto context = group().context();
  const TransferKey key(objectId());
  const std::vector<size_t> lengths = this->lengths();
  const ObjectHeader expected(key.value(), lengths);
  auto announced = std::make_shared<ObjectHeader::Bytes>();
  own(announced);
  track(context->createUnboundBuffer(announced->data(), ObjectHeader::kSize), Direction::Recv).recv(peer(), key.headerSlot());
  waitAll();
  expected.check(*announced, objectId());
  for (size_t i = 0; i < memory().size(); i++) {
    if (lengths[i] == 0) continue;
    track(context->createUnboundBuffer(memory()[i].data(), lengths[i]), Direction::Recv).recv(peer(), key.dataSlot(i));
  }
  waitAll();
}

}  // namespace tlgloo
