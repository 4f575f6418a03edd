// Keeps an addon's Node-API environment alive through its teardown until the finalizers that
// garbage collection queued have run.
//
// Node-API runs the finalizer of a collected object (an ObjectWrap's, an External's) from a native
// immediate that holds a reference to the addon's environment and drops it before it runs the
// queued finalizers. When a worker ends, its teardown runs the pending immediates, then collects
// garbage (queueing such an immediate), then lets the environment drop its own reference: the
// immediate then holds the last one, frees the environment and runs the finalizers of the freed
// one (Node 24 collects there often enough to crash a terminated worker's process).
#pragma once

#include <napi.h>

namespace tensorlane {

// JS thread, once per environment (the addon's Init): from now until the teardown's finalizers
// have run, the environment holds one more reference, dropped by an immediate queued behind them.
void holdThroughTeardown(Napi::Env env);

}  // namespace tensorlane
