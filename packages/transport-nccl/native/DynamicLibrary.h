// dlopen with every symbol resolved up front: a missing required symbol fails the load (with all
// the names missing), an optional one stays null and its feature is gated by the caller.
#pragma once

#include "Failure.h"

#include <dlfcn.h>

#include <string>
#include <type_traits>

namespace tlnccl {

class DynamicLibrary {
 public:
  explicit DynamicLibrary(const std::string& path) : path_(path) {
    // RTLD_LOCAL: the libraries' own dependencies must not interpose on anything else in the process.
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      const char* error = dlerror();
      throw Failure(FailureCode::Library, "dlopen(" + path + ") failed: " + (error != nullptr ? error : "unknown error"));
    }
  }

  template <typename F>
  void require(F& field, const char* name) {
    field = reinterpret_cast<F>(dlsym(handle_, name));
    if (field == nullptr) missing_ += std::string(missing_.empty() ? "" : ", ") + name;
  }

  template <typename F>
  void optional(F& field, const char* name) {
    field = reinterpret_cast<F>(dlsym(handle_, name));
  }

  /** Throws (and closes the library) when a required symbol was missing. */
  void check(const std::string& expected) {
    if (missing_.empty()) return;
    dlclose(handle_);
    throw Failure(FailureCode::Library, path_ + " lacks " + missing_ + ": it is not " + expected);
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* handle_ = nullptr;
  std::string missing_;
};

}  // namespace tlnccl
