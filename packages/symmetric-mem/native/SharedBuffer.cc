#include "SharedBuffer.h"

#include <tensorlane/Failure.h>

#include <dlfcn.h>

#include <string>

#ifdef TLSYM_V8_FALLBACK
#include <v8.h>
#endif

namespace tensorlane::symmetric {

namespace {

using Holder = std::shared_ptr<Segment>;

// Node-API's own call for this (node_api_create_external_sharedarraybuffer) is recent; older
// Node versions (20, 22) get the same V8 calls it makes, compiled against the running Node's headers.
using CreateExternalSab = napi_status (*)(napi_env, void*, size_t, void (*)(void*, void*), void*, napi_value*);

void releaseHolder(void* /*data*/, void* hint) { delete static_cast<Holder*>(hint); }

}  // namespace

napi_value sharedBufferOver(napi_env env, const std::shared_ptr<Segment>& segment) {
  auto* holder = new Holder(segment);
  static const auto nodeApi = reinterpret_cast<CreateExternalSab>(dlsym(RTLD_DEFAULT, "node_api_create_external_sharedarraybuffer"));
  if (nodeApi != nullptr) {
    napi_value result = nullptr;
    if (nodeApi(env, segment->data(), segment->dataBytes(), releaseHolder, holder, &result) != napi_ok) {
      delete holder;
      throw Failure(FailureCode::System, "node_api_create_external_sharedarraybuffer failed");
    }
    return result;
  }
#ifdef TLSYM_V8_FALLBACK
  std::unique_ptr<v8::BackingStore> store = v8::SharedArrayBuffer::NewBackingStore(
      segment->data(), segment->dataBytes(),
      [](void* data, size_t, void* hint) { releaseHolder(data, hint); }, holder);
  v8::Local<v8::SharedArrayBuffer> buffer = v8::SharedArrayBuffer::New(v8::Isolate::GetCurrent(), std::move(store));
  // A napi_value is a v8::Local<v8::Value> in Node's implementation (v8impl::JsValueFromV8LocalValue).
  v8::Local<v8::Value> value = buffer;
  return reinterpret_cast<napi_value>(*value);
#else
  (void)env;
  delete holder;
  throw Failure(FailureCode::System,
                "this Node has no node_api_create_external_sharedarraybuffer and the addon was built without V8 headers: rebuild it with the running Node's headers (NODE_INCLUDE_DIR)");
#endif
}

}  // namespace tensorlane::symmetric
