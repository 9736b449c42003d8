// trials.csv rows and the per-run result files a resumed tune reads back.
#include "ragtrain/tune/trial_record.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace ragtrain {

namespace {

// %.9g: a float32 figure round-trips, so a resumed search ranks exactly what the first one measured.
std::string g9(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

bool to_int(const std::string& s, int64_t& v) {
  char* end = nullptr;
  v = std::strtoll(s.c_str(), &end, 10);
  return !s.empty() && end == s.c_str() + s.size();
}

bool to_double(const std::string& s, double& v) {
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}

}  // namespace

std::string trials_csv_header(const SearchSpace& space) {
  std::string h = "trial,rung,trained_epochs,epochs_reached,val_loss,val_accuracy,seconds,status,seed";
  for (const Dimension& d : space.dims) h += "," + d.name;
  return h + "\n";
}

std::string trials_csv_row(const RungResult& r, uint64_t seed, const Recipe& recipe) {
  std::string row = std::to_string(r.trial) + "," + std::to_string(r.rung) + "," + std::to_string(r.epochs) + "," +
                    std::to_string(r.epochs_reached) + "," + g9(r.val_loss) + "," + g9(r.val_accuracy) + ",";
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2f", r.seconds);
  row += std::string(secs) + "," + trial_status_name(r.status) + "," + std::to_string(seed);
  for (const auto& [name, value] : recipe.options) row += "," + value;
  return row + "\n";
}

bool parse_trials_csv_row(const std::string& line, RungResult& r) {
  std::vector<std::string> f;
  std::stringstream s(line);
  std::string item;
  while (std::getline(s, item, ',')) f.push_back(item);
  if (f.size() < 9) return false;
  int64_t rung = 0;
  if (!to_int(f[0], r.trial) || !to_int(f[1], rung) || !to_int(f[2], r.epochs) || !to_int(f[3], r.epochs_reached) ||
      !to_double(f[4], r.val_loss) || !to_double(f[5], r.val_accuracy) || !to_double(f[6], r.seconds) ||
      !parse_trial_status(f[7], r.status))
    return false;
  r.rung = static_cast<int>(rung);
  if (r.status == TrialStatus::Done && !(std::isfinite(r.val_loss) && std::isfinite(r.val_accuracy))) return false;
  return true;
}

std::string run_name(int64_t trial, int rung) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "runs/t%04lld-r%d", static_cast<long long>(trial), rung);
  return buf;
}

}  // namespace ragtrain
