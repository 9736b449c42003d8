// Memory budgets: `--max-memory` sizes ("512M", "8G") and what "auto" means on this node. Sizes declared in a
// file are checked against the budget before anything is allocated, so a file that claims 10^12 rows gets a
// message instead of std::bad_alloc or the OOM killer.
#pragma once

#include <cstdint>
#include <string>

namespace ragtrain {

// "123", "64K", "512M", "8G", "1T" (powers of 1024, an optional trailing "B" or "iB"); -1 if not a size.
int64_t parse_size(const std::string& text);

// Bytes this process may use for its data: the parsed value, or for "auto" the node's memory (the smaller of
// physical memory and a cgroup limit, as under Slurm) divided by the ranks on this node.
int64_t memory_budget(const std::string& max_memory, int ranks_on_node);

// Throws UserError unless `bytes` fits in `budget`; `what` says what would be allocated and where it comes from.
void check_fits(int64_t bytes, int64_t budget, const std::string& what, const std::string& max_memory);

// "1.5 GiB" style.
std::string byte_string(double bytes);

}  // namespace ragtrain
