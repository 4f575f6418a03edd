#include "DynamicLibrary.h"

#include <dlfcn.h>

namespace tensorlane {

DynamicLibrary::DynamicLibrary(const std::string& path) : path_(path), handle_(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
  if (handle_ != nullptr) return;
  const char* why = dlerror();
  throw Failure(FailureCode::Library, "dlopen(" + path + ") failed: " + (why != nullptr ? why : "unknown error"));
}

void* DynamicLibrary::symbol(const char* name) const { return dlsym(handle_, name); }

void DynamicLibrary::check(const std::string& expected) {
  if (missing_.empty()) return;
  dlclose(handle_);
  throw Failure(FailureCode::Library, path_ + " lacks " + missing_ + ": it is not " + expected);
}

}  // namespace tensorlane
