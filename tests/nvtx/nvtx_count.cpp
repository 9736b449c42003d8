// An NVTX injection library for the tests (CUDA builds): loaded by NVTX3 through NVTX_INJECTION64_PATH, as Nsight
// Systems' own is, it counts the ranges pushed per registered name and domain and checks that every push is popped.
// At process exit it writes "DOMAIN NAME COUNT" lines, then "unbalanced N" and "max_depth D", to
// $RAGTRAIN_NVTX_COUNTS.<OMPI_COMM_WORLD_RANK or pid>. No GPU is needed: NVTX is host code.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unistd.h>
#include <utility>

namespace {

struct Counts {
  std::mutex lock;
  std::map<std::pair<std::string, std::string>, long> pushes;   // (domain, name) -> ranges
  std::map<const void*, std::string> domains;
  long depth = 0, max_depth = 0, unbalanced = 0;
  ~Counts() { write(); }
  void write() {
    const char* base = std::getenv("RAGTRAIN_NVTX_COUNTS");
    if (base == nullptr) return;
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    const std::string path = std::string(base) + "." + (rank ? rank : std::to_string(::getpid()));
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) return;
    for (const auto& [key, n] : pushes) std::fprintf(f, "%s %s %ld\n", key.first.c_str(), key.second.c_str(), n);
    std::fprintf(f, "unbalanced %ld\nmax_depth %ld\n", unbalanced + depth, max_depth);
    std::fclose(f);
  }
};
Counts& counts() {
  static Counts c;   // the injection library's own state; NVTX calls it from the traced process
  return c;
}

nvtxDomainHandle_t domain_create(const char* name) {
  auto* handle = new std::string(name);   // lives as long as the process: NVTX may use it until exit
  std::lock_guard<std::mutex> g(counts().lock);
  counts().domains[handle] = name;
  return reinterpret_cast<nvtxDomainHandle_t>(handle);
}
void domain_destroy(nvtxDomainHandle_t) {}
nvtxStringHandle_t register_string(nvtxDomainHandle_t, const char* s) {
  return reinterpret_cast<nvtxStringHandle_t>(new std::string(s));
}
int range_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  std::string name = "?";
  if (a && a->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
    name = *reinterpret_cast<const std::string*>(a->message.registered);
  else if (a && a->messageType == NVTX_MESSAGE_TYPE_ASCII)
    name = a->message.ascii;
  std::lock_guard<std::mutex> g(counts().lock);
  Counts& c = counts();
  const std::string domain = c.domains.count(d) ? c.domains[d] : "?";
  c.pushes[{domain, name}] += 1;
  c.max_depth = std::max(c.max_depth, ++c.depth);
  return static_cast<int>(c.depth - 1);
}
int range_pop(nvtxDomainHandle_t) {
  std::lock_guard<std::mutex> g(counts().lock);
  Counts& c = counts();
  if (c.depth == 0) {
    ++c.unbalanced;
    return -1;
  }
  return static_cast<int>(--c.depth);
}

template <class F>
void set(NvtxFunctionTable table, unsigned size, unsigned id, F fn) {
  if (id <= size && table[id] != nullptr) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace

extern "C" int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (cb == nullptr || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) return 0;
  counts();   // constructed before any range, destroyed (and written) at exit
  set(table, size, NVTX_CBID_CORE2_DomainCreateA, &domain_create);
  set(table, size, NVTX_CBID_CORE2_DomainDestroy, &domain_destroy);
  set(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, &register_string);
  set(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &range_push);
  set(table, size, NVTX_CBID_CORE2_DomainRangePop, &range_pop);
  return 1;
}
