#pragma once

#include <string>

namespace tensorlane::gloo {

// Redirects the calls one loaded shared library makes to a function it imports (its GOT slots for
// that symbol) to `replacement`, for the life of the process; returns the function the library
// called until then. `inLibrary`: any address inside the library (one of its functions). Debian's
// libgloo exists only as a shared library, so this is the way to stand between gloo's TCP pairs
// and the sockets they accept, connect and poll. Failure(Io) when the library imports no such
// symbol or its slots cannot be written. Not thread-safe: call it before the library's threads run.
void* redirectImport(const void* inLibrary, const std::string& symbol, void* replacement);

}  // namespace tensorlane::gloo
