// A library of the CUDA stack opened at run time, every symbol resolved up front: a missing required
// symbol fails the load (with all the names missing), an optional one stays null and its feature is
// gated by the caller.
#pragma once

#include "Failure.h"

#include <RuntimeLibrary.h>

#include <string>

namespace tlnccl {

class DynamicLibrary {
 public:
  explicit DynamicLibrary(const std::string& path) : path_(path), handle_(open(path)), entryPoints_(handle_) {}

  template <typename F>
  void require(F& field, const char* name) {
    entryPoints_(field, name);
  }

  template <typename F>
  void optional(F& field, const char* name) {
    entryPoints_.optional(field, name);
  }

  /** Throws (and closes the library) when a required symbol was missing. */
  void check(const std::string& expected) {
    if (entryPoints_.missing().empty()) return;
    dlclose(handle_);
    throw Failure(FailureCode::Library, path_ + " lacks " + entryPoints_.missing() + ": it is not " + expected);
  }

  const std::string& path() const { return path_; }

 private:
  static void* open(const std::string& path) {
    std::string error;
    void* handle = tensorlane::openRuntimeLibrary(path, error);
    if (handle == nullptr) throw Failure(FailureCode::Library, error);
    return handle;
  }

  std::string path_;
  void* handle_;
  tensorlane::EntryPoints entryPoints_;
};

}  // namespace tlnccl
