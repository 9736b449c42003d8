// --max-memory parsing and the per-rank budget.
#include "ragtrain/core/memory.hpp"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <limits>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

int64_t parse_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 18) return -1;
  int64_t value = std::stoll(text.substr(0, i));
  std::string unit = text.substr(i);
  if (unit.size() >= 2 && unit.compare(unit.size() - 2, 2, "iB") == 0) unit.resize(unit.size() - 2);
  else if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  int shift = 0;
  if (unit.size() == 1) {
    const std::string units = "KMGT";
    const size_t k = units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
    if (k == std::string::npos) return -1;
    shift = 10 * static_cast<int>(k + 1);
  } else if (!unit.empty()) {
    return -1;
  }
  if (value > (std::numeric_limits<int64_t>::max() >> shift)) return -1;
  return value << shift;
}

namespace {
// cgroup v2 (memory.max) or v1 (memory.limit_in_bytes) limit of this process, or max() if none.
int64_t cgroup_limit() {
  for (const char* p : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream f(p);
    std::string v;
    if (f >> v && !v.empty() && std::isdigit(static_cast<unsigned char>(v[0]))) {
      const int64_t n = parse_size(v);
      if (n > 0) return n;
    }
  }
  return std::numeric_limits<int64_t>::max();
}
}  // namespace

int64_t memory_budget(const std::string& max_memory, int ranks_on_node) {
  if (max_memory != "auto") {
    const int64_t n = parse_size(max_memory);
    USER_CHECK(n > 0, "option --max-memory: '" << max_memory << "' is not a size",
               "use auto or a size such as 512M or 8G");
    return n;
  }
  const int64_t physical = static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE);
  const int64_t node = std::min(physical, cgroup_limit());
  return node / std::max(1, ranks_on_node);
}

std::string byte_string(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

void check_fits(int64_t bytes, int64_t budget, const std::string& what, const std::string& max_memory) {
  USER_CHECK(bytes >= 0 && bytes <= budget,
             what << " needs " << byte_string(static_cast<double>(bytes)) << " but this rank may use "
                  << byte_string(static_cast<double>(budget))
                  << (max_memory == "auto" ? " (--max-memory auto: node memory / ranks on the node)"
                                           : " (--max-memory " + max_memory + ")"),
             "use more ranks (each reads only its shard), raise --max-memory if the machine has the memory, or "
             "check the file: `ragtrain inspect` shows the sizes it declares");
}

}  // namespace ragtrain
