// A JS SharedArrayBuffer over a segment's data that keeps the mapping alive until every thread's
// buffer is collected. SharedArrayBuffers cross to worker threads by reference (the core hands
// host tensors to its transfer agent so), which an external ArrayBuffer could not.
#pragma once

#include "Segment.h"

#include <node_api.h>

#include <memory>

namespace tensorlane::symmetric {

napi_value sharedBufferOver(napi_env env, const std::shared_ptr<Segment>& segment);

}  // namespace tensorlane::symmetric
