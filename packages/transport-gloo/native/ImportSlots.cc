#include "ImportSlots.h"

#include <tensorlane/Failure.h>

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

namespace tensorlane::gloo {

namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobalData = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobalData = R_AARCH64_GLOB_DAT;
#else
#error "redirectImport knows the relocations of x86_64 and aarch64 only"
#endif

struct Search {
  uintptr_t base;
  std::string symbol;
  std::vector<void**> slots;
  // The library's read-only-after-relocation range (full RELRO covers its GOT).
  uintptr_t relroStart = 0;
  uintptr_t relroEnd = 0;
  bool found = false;
};

// Collects the slots that the relocations in `bytes` bytes at `table` fill with `symbol`'s address.
void collect(Search& search, const ElfW(Rela) * table, size_t bytes, const ElfW(Sym) * symbols, const char* strings) {
  for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); i++) {
    const ElfW(Rela)& rela = table[i];
    const uint32_t type = ELF64_R_TYPE(rela.r_info);
    if (type != kJumpSlot && type != kGlobalData) continue;
    const ElfW(Sym)& symbol = symbols[ELF64_R_SYM(rela.r_info)];
    if (search.symbol == strings + symbol.st_name) search.slots.push_back(reinterpret_cast<void**>(search.base + rela.r_offset));
  }
}

int visit(dl_phdr_info* info, size_t, void* data) {
  auto& search = *static_cast<Search*>(data);
  if (info->dlpi_addr != search.base) return 0;
  search.found = true;
  const ElfW(Dyn)* dynamic = nullptr;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& header = info->dlpi_phdr[i];
    if (header.p_type == PT_DYNAMIC) dynamic = reinterpret_cast<const ElfW(Dyn)*>(search.base + header.p_vaddr);
    if (header.p_type == PT_GNU_RELRO) {
      search.relroStart = search.base + header.p_vaddr;
      search.relroEnd = search.relroStart + header.p_memsz;
    }
  }
  if (dynamic == nullptr) return 1;
  // glibc rewrites these entries to run-time addresses when it loads the library; other loaders
  // leave them relative to its base.
  const auto address = [&](ElfW(Addr) value) { return value < search.base ? search.base + value : value; };
  const ElfW(Sym)* symbols = nullptr;
  const char* strings = nullptr;
  const ElfW(Rela)* plt = nullptr;
  const ElfW(Rela)* rela = nullptr;
  size_t pltBytes = 0, relaBytes = 0;
  for (const ElfW(Dyn)* entry = dynamic; entry->d_tag != DT_NULL; entry++) {
    switch (entry->d_tag) {
      case DT_SYMTAB: symbols = reinterpret_cast<const ElfW(Sym)*>(address(entry->d_un.d_ptr)); break;
      case DT_STRTAB: strings = reinterpret_cast<const char*>(address(entry->d_un.d_ptr)); break;
      case DT_JMPREL: plt = reinterpret_cast<const ElfW(Rela)*>(address(entry->d_un.d_ptr)); break;
      case DT_PLTRELSZ: pltBytes = entry->d_un.d_val; break;
      case DT_RELA: rela = reinterpret_cast<const ElfW(Rela)*>(address(entry->d_un.d_ptr)); break;
      case DT_RELASZ: relaBytes = entry->d_un.d_val; break;
      default: break;
    }
  }
  if (symbols == nullptr || strings == nullptr) return 1;
  if (plt != nullptr) collect(search, plt, pltBytes, symbols, strings);
  if (rela != nullptr) collect(search, rela, relaBytes, symbols, strings);
  return 1;
}

}  // namespace

void* redirectImport(const void* inLibrary, const std::string& symbol, void* replacement) {
  Dl_info library;
  if (dladdr(inLibrary, &library) == 0) throw Failure(FailureCode::Io, "cannot tell which library holds gloo's code");
  const std::string name = library.dli_fname != nullptr ? library.dli_fname : "gloo's library";
  // dlpi_addr is the load bias; for a shared library it equals the base dladdr reports.
  Search search{reinterpret_cast<uintptr_t>(library.dli_fbase), symbol, {}};
  dl_iterate_phdr(visit, &search);
  if (!search.found || search.slots.empty()) {
    throw Failure(FailureCode::Io, name + " does not import " + symbol + " as tensorlane expects of Debian's gloo");
  }
  const long page = sysconf(_SC_PAGESIZE);
  void* previous = *search.slots.front();
  // A slot still pointing into the library is a lazy-binding stub: the function it would bind to is
  // the one the process's global lookup finds.
  Dl_info target;
  if (dladdr(previous, &target) != 0 && target.dli_fbase == library.dli_fbase) previous = dlsym(RTLD_DEFAULT, symbol.c_str());
  if (previous == nullptr) throw Failure(FailureCode::Io, "cannot find the " + symbol + " that " + name + " calls");
  for (void** slot : search.slots) {
    const auto at = reinterpret_cast<uintptr_t>(slot);
    void* start = reinterpret_cast<void*>(at & ~static_cast<uintptr_t>(page - 1));
    const bool relro = at >= search.relroStart && at < search.relroEnd;
    if (relro && mprotect(start, page, PROT_READ | PROT_WRITE) != 0) {
      throw Failure(FailureCode::Io, "cannot redirect " + name + "'s calls to " + symbol + ": " + std::strerror(errno));
    }
    *slot = replacement;
    if (relro) mprotect(start, page, PROT_READ);
  }
  return previous;
}

}  // namespace tensorlane::gloo
