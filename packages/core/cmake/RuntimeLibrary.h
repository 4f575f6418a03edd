// Shared libraries an addon opens at run time instead of linking them (NCCL, the CUDA runtime and
// driver, NVSHMEM, NIXL's C API), and their entry points resolved up front. On the include path of
// every addon built with tensorlane_addon() (TensorlaneAddon.cmake).
#pragma once

#include <dlfcn.h>

#include <string>

namespace tensorlane {

/**
 * dlopen(path, RTLD_NOW | RTLD_LOCAL): the library's own dependencies must not interpose on anything
 * else in the process. On failure nullptr, and `error` says why ("dlopen(<path>) failed: <dlerror>").
 */
inline void* openRuntimeLibrary(const std::string& path, std::string& error) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    error = "dlopen(" + path + ") failed: " + (why != nullptr ? why : "unknown error");
  }
  return handle;
}

/** Resolves entry points of an opened library into their fields; required ones that are not found are listed. */
class EntryPoints {
 public:
  explicit EntryPoints(void* handle) : handle_(handle) {}

  template <typename Fn>
  void operator()(Fn& field, const char* name) {
    optional(field, name);
    if (field == nullptr) missing_ += std::string(missing_.empty() ? "" : ", ") + name;
  }

  /** An entry point the caller can do without (a feature of later versions): null when absent. */
  template <typename Fn>
  void optional(Fn& field, const char* name) {
    field = reinterpret_cast<Fn>(dlsym(handle_, name));
  }

  /** The required entry points not found, comma-separated; empty when every one was. */
  const std::string& missing() const { return missing_; }

 private:
  void* handle_;
  std::string missing_;
};

}  // namespace tensorlane
