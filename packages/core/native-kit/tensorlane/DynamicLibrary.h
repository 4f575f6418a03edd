// Shared libraries an addon opens at run time instead of linking them (NCCL, the CUDA runtime and
// driver, NVSHMEM, NIXL's C API): the build then needs none of their headers, and an addon loads
// on a machine without them. Core's NativeAddon.ts finds the file; this opens it.
#pragma once

#include "Failure.h"

#include <mutex>
#include <string>

namespace tensorlane {

// One library opened with dlopen(RTLD_NOW | RTLD_LOCAL), so that its own dependencies interpose on
// nothing else in the process, and its entry points resolved up front: a missing required one fails
// the load (naming every one missing), an optional one stays null and the caller gates its feature.
class DynamicLibrary {
 public:
  // Failure(Library) "dlopen(<path>) failed: <why>" when it does not open.
  explicit DynamicLibrary(const std::string& path);

  template <typename F>
  void require(F& field, const char* name) {
    optional(field, name);
    if (field == nullptr) missing_ += std::string(missing_.empty() ? "" : ", ") + name;
  }

  template <typename F>
  void optional(F& field, const char* name) {
    field = reinterpret_cast<F>(symbol(name));
  }

  // Failure(Library) "<path> lacks <names>: it is not <expected>" (closing the library) when a
  // required entry point was missing.
  void check(const std::string& expected);

 private:
  void* symbol(const char* name) const;

  std::string path_;
  void* handle_;
  std::string missing_;
};

// A library loaded once per process and shared by every thread's instance of the addon: its entry
// points are an `Api` that derives from ProcessLibrary<Api>, names the library in `kName` and opens
// it in `static Api* open(const std::string& path)` (a new Api, with a DynamicLibrary). Neither the
// library nor its Api is ever destroyed: the library's threads and atexit handlers outlive any
// addon instance, and may still use it while the process exits.
template <typename Api>
class ProcessLibrary {
 public:
  // The library, loaded from `path` unless loaded already: from the same path that is a no-op, from
  // another a Failure(Usage). `open` opens it (Api::open by default).
  static Api& load(const std::string& path) { return load(path, &Api::open); }

  template <typename Open>
  static Api& load(const std::string& path, Open&& open) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.api != nullptr) {
      if (path != s.path) throw Failure(FailureCode::Usage, std::string(Api::kName) + " is already loaded from " + s.path + ", cannot load " + path + " as well");
      return *s.api;
    }
    s.api = open(path);
    s.path = path;
    return *s.api;
  }

  // The loaded library; Failure(Library) before load().
  static Api& get() {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.api == nullptr) throw Failure(FailureCode::Library, std::string(Api::kName) + " is not loaded");
    return *s.api;
  }

  // Where it was loaded from; "" before load().
  static std::string loadedPath() {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.path;
  }

 private:
  struct State {
    std::mutex mutex;
    Api* api = nullptr;
    std::string path;
  };

  static State& state() {
    static auto* state = new State();
    return *state;
  }
};

}  // namespace tensorlane
