// Opening the shared libraries the addon finds at run time instead of linking them (NVSHMEM's host
// library, the CUDA driver) and resolving their entry points. RTLD_LOCAL: their symbols stay theirs.
#pragma once

#include <dlfcn.h>

#include <string>

namespace tlsym {

/** dlopen(path, RTLD_NOW | RTLD_LOCAL); on failure nullptr, and `error` says why (dlerror's text). */
inline void* openRuntimeLibrary(const std::string& path, std::string& error) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    error = why != nullptr ? why : "dlopen(" + path + ") failed";
  }
  return handle;
}

/** Resolves entry points of an opened library into their fields, keeping the first name it cannot find. */
class EntryPoints {
 public:
  explicit EntryPoints(void* handle) : handle_(handle) {}

  template <typename Fn>
  void operator()(Fn& field, const char* name) {
    void* found = dlsym(handle_, name);
    if (found == nullptr && missing_.empty()) missing_ = name;
    field = reinterpret_cast<Fn>(found);
  }

  /** The first entry point not found; empty when every one was. */
  const std::string& missing() const { return missing_; }

 private:
  void* handle_;
  std::string missing_;
};

}  // namespace tlsym
