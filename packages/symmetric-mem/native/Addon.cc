// Entry point of the tensorlane symmetric-memory addon: thin bindings over the process-wide
// SegmentTable (see SegmentTable.h for why every thread shares it), the NVSHMEM host library and
// the CUDA driver's device selection.
#include "CopyJob.h"
#include "CudaDriver.h"
#include "ExportTable.h"
#include "NvshmemLibrary.h"
#include "Segment.h"
#include "SegmentTable.h"
#include "SharedBuffer.h"

#include <tensorlane/Arguments.h>
#include <tensorlane/Teardown.h>

#include <napi.h>
#include <unistd.h>

#include <string>

namespace tensorlane::symmetric {

namespace {

std::shared_ptr<Segment> mapped(const std::string& key) {
  std::shared_ptr<Segment> segment = SegmentTable::instance().get(key);
  if (segment == nullptr) throw Failure(FailureCode::Usage, "no segment is mapped as \"" + key + "\" in this process");
  return segment;
}

Napi::Value CreateSegment(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    std::string key = stringArg(info[0], "key");
    std::shared_ptr<Segment> segment = Segment::create(stringArg(info[1], "name"), sizeArg(info[2], "dataBytes", FailureCode::Protocol));
    SegmentTable::instance().put(key, segment);
    return Napi::String::New(info.Env(), segment->token());
  });
}

Napi::Value OpenSegment(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    std::string key = stringArg(info[0], "key");
    std::shared_ptr<Segment> segment = Segment::openByName(stringArg(info[1], "name"), stringArg(info[2], "token"), true);
    SegmentTable::instance().put(key, segment);
    return Napi::Number::New(info.Env(), static_cast<double>(segment->dataBytes()));
  });
}

Napi::Value CountOpener(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    return Napi::Number::New(info.Env(), mapped(stringArg(info[0], "key"))->countOpener());
  });
}

Napi::Value OpenPeerSegment(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    std::string key = stringArg(info[0], "key");
    std::shared_ptr<Segment> segment =
        Segment::openByPid(static_cast<int64_t>(sizeArg(info[1], "pid", FailureCode::Protocol)), static_cast<int64_t>(sizeArg(info[2], "fd", FailureCode::Protocol)), stringArg(info[3], "token"));
    SegmentTable::instance().put(key, segment);
    return Napi::Number::New(info.Env(), static_cast<double>(segment->dataBytes()));
  });
}

Napi::Value ReserveSegment(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    std::shared_ptr<Segment> segment = mapped(stringArg(info[0], "key"));
    return Napi::Boolean::New(info.Env(), segment->reserve(sizeArg(info[1], "offset", FailureCode::Protocol), sizeArg(info[2], "length", FailureCode::Protocol)));
  });
}

Napi::Value UnlinkSegment(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    Segment::unlink(stringArg(info[0], "name"));
    return info.Env().Undefined();
  });
}

Napi::Value DetachSegment(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    return Napi::Boolean::New(info.Env(), SegmentTable::instance().remove(stringArg(info[0], "key")));
  });
}

Napi::Value SegmentBuffer(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    std::shared_ptr<Segment> segment = SegmentTable::instance().get(stringArg(info[0], "key"));
    if (segment == nullptr) return info.Env().Undefined();
    if (!segment->writable()) throw Failure(FailureCode::Usage, "a peer's segment is read through readSegment only");
    try {
      return Napi::Value(info.Env(), sharedBufferOver(info.Env(), segment));
    } catch (const std::bad_alloc&) {
      throw Failure(FailureCode::System, "out of memory wrapping a segment");
    }
  });
}

Napi::Value SegmentInfo(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    std::shared_ptr<Segment> segment = SegmentTable::instance().get(stringArg(info[0], "key"));
    if (segment == nullptr) return info.Env().Undefined();
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("token", segment->token());
    out.Set("fd", segment->fd());
    out.Set("pid", static_cast<double>(getpid()));
    out.Set("dataBytes", static_cast<double>(segment->dataBytes()));
    return out;
  });
}

Napi::Value SegmentKeys(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    std::vector<std::string> keys = SegmentTable::instance().keys();
    Napi::Array out = Napi::Array::New(info.Env(), keys.size());
    for (size_t i = 0; i < keys.size(); i++) out.Set(static_cast<uint32_t>(i), keys[i]);
    return out;
  });
}

Napi::Value Locate(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    Napi::Uint8Array bytes = bytesArg(info[0], "bytes");
    auto found = SegmentTable::instance().locate(bytes.Data(), bytes.ByteLength());
    if (!found.has_value()) return info.Env().Undefined();
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("key", found->first);
    out.Set("offset", static_cast<double>(found->second));
    return out;
  });
}

Napi::Value Copy(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    Napi::Uint8Array target = bytesArg(info[0], "target");
    Napi::Uint8Array source = bytesArg(info[1], "source");
    if (target.ByteLength() != source.ByteLength()) {
      throw Failure(FailureCode::Usage, "copy of " + std::to_string(source.ByteLength()) + " bytes into " + std::to_string(target.ByteLength()));
    }
    Napi::Array keep = Napi::Array::New(info.Env(), 2);
    keep.Set(0u, target);
    keep.Set(1u, source);
    return CopyJob::Start(info.Env(), target.Data(), source.Data(), target.ByteLength(), keep, nullptr);
  });
}

Napi::Value ReadSegment(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    std::shared_ptr<Segment> segment = mapped(stringArg(info[0], "key"));
    uint64_t offset = sizeArg(info[1], "offset", FailureCode::Protocol);
    Napi::Uint8Array target = bytesArg(info[2], "target");
    if (offset > segment->dataBytes() || target.ByteLength() > segment->dataBytes() - offset) {
      throw Failure(FailureCode::Protocol, "a read of " + std::to_string(target.ByteLength()) + " bytes at offset " + std::to_string(offset) +
                                               " leaves the segment's " + std::to_string(segment->dataBytes()) + " bytes");
    }
    return CopyJob::Start(info.Env(), target.Data(), segment->data() + offset, target.ByteLength(), target, segment);
  });
}

Napi::Value PinExport(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    std::string objectId = stringArg(info[0], "objectId");
    Napi::Uint8Array bytes = bytesArg(info[1], "bytes");
    ExportTable::instance().pin(objectId, bytes.Data(), bytes.ByteLength());
    return info.Env().Undefined();
  });
}

Napi::Value ReleaseExport(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    return Napi::Boolean::New(info.Env(), ExportTable::instance().release(stringArg(info[0], "objectId")));
  });
}

Napi::Value ExportsOver(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    Napi::Uint8Array bytes = bytesArg(info[0], "bytes");
    std::vector<std::string> holders = ExportTable::instance().holders(bytes.Data(), bytes.ByteLength());
    Napi::Array out = Napi::Array::New(info.Env(), holders.size());
    for (size_t i = 0; i < holders.size(); i++) out.Set(static_cast<uint32_t>(i), holders[i]);
    return out;
  });
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  tensorlane::holdThroughTeardown(env);
  exports.Set("createSegment", Napi::Function::New(env, CreateSegment));
  exports.Set("openSegment", Napi::Function::New(env, OpenSegment));
  exports.Set("countOpener", Napi::Function::New(env, CountOpener));
  exports.Set("openPeerSegment", Napi::Function::New(env, OpenPeerSegment));
  exports.Set("reserveSegment", Napi::Function::New(env, ReserveSegment));
  exports.Set("unlinkSegment", Napi::Function::New(env, UnlinkSegment));
  exports.Set("detachSegment", Napi::Function::New(env, DetachSegment));
  exports.Set("segmentBuffer", Napi::Function::New(env, SegmentBuffer));
  exports.Set("segmentInfo", Napi::Function::New(env, SegmentInfo));
  exports.Set("segmentKeys", Napi::Function::New(env, SegmentKeys));
  exports.Set("locate", Napi::Function::New(env, Locate));
  exports.Set("copy", Napi::Function::New(env, Copy));
  exports.Set("readSegment", Napi::Function::New(env, ReadSegment));
  exports.Set("pinExport", Napi::Function::New(env, PinExport));
  exports.Set("releaseExport", Napi::Function::New(env, ReleaseExport));
  exports.Set("exportsOver", Napi::Function::New(env, ExportsOver));
  registerNvshmem(env, exports);
  registerCudaDriver(env, exports);
  return exports;
}

}  // namespace

}  // namespace tensorlane::symmetric

static Napi::Object InitAddon(Napi::Env env, Napi::Object exports) { return tensorlane::symmetric::Init(env, exports); }

NODE_API_MODULE(tensorlane_symmetric, InitAddon)
