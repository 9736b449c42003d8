// The inputs and outputs of every subcommand, what an existing path holds, and the refusal of outputs that would
// lose data. Identity is by device and inode (core/output_file.hpp), so links and other spellings are caught.
#include "ragtrain/cli/output_guard.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <vector>

#include "ragtrain/checkpoint/checkpoint.hpp"
#include "ragtrain/checkpoint/rotation.hpp"
#include "ragtrain/checkpoint/run_lock.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/output_file.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/h5.hpp"
#include "ragtrain/metrics/plots.hpp"
#include "ragtrain/tune/tune_config.hpp"

namespace ragtrain {

namespace fs = std::filesystem;

namespace {

enum class Writes { DataSet, File, Folder };

struct Named {
  std::string option, path;
};

struct Output {
  std::string option, path;
  Writes writes;
  std::string kind;   // what it writes, for messages: "a CSV file", "a data set", ...
};

// HDF5's signature sits at byte 0, or after a user block of 512, 1024, 2048, ... bytes.
bool has_hdf5_signature(const std::string& path) {
  static const char sig[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  std::ifstream in(path, std::ios::binary);
  for (std::streamoff at : {0, 512, 1024, 2048, 4096}) {
    char buf[8] = {};
    in.clear();
    in.seekg(at);
    if (in.read(buf, 8) && std::equal(buf, buf + 8, sig)) return true;
  }
  return false;
}

// The "format" attribute of an HDF5 file ("" when it has none; nullopt-like "?" when the file cannot be opened).
// File locking is off for this read-only look: a file another process holds open must still be recognised.
std::string hdf5_format(const std::string& path, std::string& detail) {
  H5QuietErrors quiet;
  H5Handle fapl = h5_plist(H5Pcreate(H5P_FILE_ACCESS));
#if H5_VERSION_GE(1, 10, 7)
  if (fapl) H5Pset_file_locking(fapl.get(), 0, 1);
#endif
  H5Handle f = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl ? fapl.get() : H5P_DEFAULT));
  if (!f) return "?";
  if (attr_shape(f.get(), "format").kind != AttrKind::String) return "";
  const std::string format = read_string_attr(f.get(), "format");
  if (attr_shape(f.get(), "task").kind == AttrKind::String) detail = read_string_attr(f.get(), "task");
  if (format == kCheckpointFormat && attr_shape(f.get(), "step").kind == AttrKind::Integer)
    detail += (detail.empty() ? "" : ", ") + std::string("step ") + std::to_string(read_int_attr(f.get(), "step"));
  return format;
}

std::string size_text(uintmax_t bytes) { return std::to_string(bytes) + " bytes"; }

// What a regular file that is not HDF5 looks like, from its first bytes.
std::string sniff(const std::string& path, uintmax_t size) {
  std::ifstream in(path, std::ios::binary);
  char head[512] = {};
  in.read(head, sizeof head);
  const std::streamsize n = in.gcount();
  if (n >= 4 && head[0] == '\x89' && head[1] == 'P' && head[2] == 'N' && head[3] == 'G')
    return "a PNG image (" + size_text(size) + ")";
  bool text = true;
  for (std::streamsize i = 0; i < n; ++i)
    if (head[i] == '\0') text = false;
  if (!text) return "binary data (" + size_text(size) + ")";
  std::streamsize first = 0;
  while (first < n && std::isspace(static_cast<unsigned char>(head[first]))) ++first;
  if (first < n && (head[first] == '{' || head[first] == '[')) return "JSON text (" + size_text(size) + ")";
  return "text (" + size_text(size) + ")";
}

// Regular files directly inside `dir`: what a folder input (a CSV folder, a run folder) reads.
std::vector<Named> files_in(const Named& folder) {
  std::vector<Named> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder.path, ec))
    if (e.is_regular_file(ec)) out.push_back({folder.option + " (a file of that folder)", e.path().string()});
  return out;
}

void refuse_if_input(const std::string& option, const std::string& path, const std::vector<Named>& inputs) {
  for (const Named& in : inputs)
    USER_CHECK(!same_file(path, in.path),
               option << " " << path << " names the same file as " << in.option << " " << in.path
                      << ", an input of this command; writing it would destroy the input",
               "write the output to another path; --force never replaces an input");
}

// The verdict on one existing or new file that this command is about to write.
void check_file(const Output& out, const std::string& path, bool force) {
  const Existing e = what_is_at(path);
  const std::string where = out.option + " " + path;
  switch (e.kind) {
    case Holding::Nothing:
      return;
    case Holding::RunFolder:
    case Holding::Folder:
      throw UserError(where + " is " + e.what + ", not a file", "name a file to write, e.g. " + path + "/out");
    case Holding::Checkpoint:
      throw UserError(where + " already holds " + e.what + "; a checkpoint is never replaced, not even with --force",
                      "write " + out.kind + " to another path (move the checkpoint yourself if you mean to drop it)");
    case Holding::DataSet:
      USER_CHECK(out.writes == Writes::DataSet,
                 where << " already holds " << e.what << "; a data set is never replaced by " << out.kind
                       << ", not even with --force",
                 "write " << out.kind << " to another path");
      USER_CHECK(force, where << " already holds " << e.what,
                 "pass --force to replace it with the new data set, or write to another path");
      return;
    case Holding::Hdf5Unknown:
    case Holding::File:
      USER_CHECK(force, where << " already exists and holds " << e.what,
                 "pass --force to replace it, or write to another path");
      return;
  }
}

// A folder output (train --out, plot --out): the folder itself, then each file the command writes into it.
void check_folder(const Output& out, const std::vector<std::string>& names, const std::vector<Named>& inputs,
                  const RunConfig& c) {
  std::error_code ec;
  if (fs::exists(out.path, ec) && !fs::is_directory(out.path, ec)) {
    refuse_if_input(out.option, out.path, inputs);
    throw UserError(out.option + " " + out.path + " is a file holding " + what_is_at(out.path).what + ", not a folder",
                    out.option + " names the folder " + c.command + " writes into: choose a new path");
  }
  refuse_if_held(inspect_run_lock(out.path), out.option, out.path);
  // --resume continues the run whose files these are, in its own folder (the checkpoint's). Resumed into another
  // folder, that one may hold no other run's records: it is checked as for a fresh run.
  bool resuming = false;
  if (c.command == "train" && !c.start.resume.empty()) {
    std::error_code ec2;
    const fs::path from = fs::is_directory(c.start.resume, ec2) ? fs::path(c.start.resume)
                                                                 : fs::path(c.start.resume).parent_path();
    resuming = same_file(from.empty() ? "." : from.string(), out.path);
  }
  // A tune folder (it holds tune.ini) is continued by the same search: its records are the search's own.
  if (c.command == "tune") resuming = fs::exists(fs::path(out.path) / kTuneRecordName, ec);
  // RUN/plots, plot's own folder when --out is left out, holds what an earlier `plot` drew: redrawing a live run
  // replaces those files (never a data set or checkpoint found there) without --force.
  const bool force = c.force || (c.command == "plot" && c.out.empty());
  for (const std::string& name : names) {
    const std::string path = (fs::path(out.path) / name).string();
    refuse_if_input(out.option, path, inputs);
    if (resuming) continue;   // --resume continues the run whose files these are
    const Existing e = what_is_at(path);
    if (c.command == "train" && name == kLatestCheckpointName && e.kind != Holding::Nothing)
      throw UserError(out.option + " " + out.path + " holds the checkpoints of an earlier run (" + path + ": " +
                          e.what + ")",
                      "continue that run with --resume " + out.path + ", or start afresh in another --out folder");
    // The best model of an earlier run that left no checkpoint.h5 (killed before its first one): a record of
    // that run like its metrics, replaced only with --force (train.sbatch's fresh restart after a requeue).
    if (c.command == "train" && name == kBestCheckpointName && e.kind == Holding::Checkpoint) {
      USER_CHECK(force, out.option << " " << out.path << " holds the best model of an earlier run (" << path << ": "
                                   << e.what << ")",
                 "start afresh in another --out folder, or pass --force to replace that run's records");
      continue;
    }
    check_file(Output{out.option, path, Writes::File, out.kind}, path, force);
  }
}

// --trace is written at the end of the run: its folder must exist now, not after hours of training; and it
// must not name a file that the command writes anyway (train: a file of its --out folder; bench: its --out).
void check_trace_path(const RunConfig& c, const Output* out) {
  const fs::path trace = fs::absolute(c.trace).lexically_normal();
  if (out != nullptr) {
    std::vector<fs::path> others;
    if (out->writes == Writes::Folder) {
      for (const char* name : {kLatestCheckpointName, "metrics.jsonl", "metrics.csv", "summary.json", "order.csv",
                               kBestCheckpointName, kRunLockName})
        others.push_back(fs::absolute(fs::path(out->path) / name).lexically_normal());
    } else {
      others.push_back(fs::absolute(out->path).lexically_normal());
    }
    for (const fs::path& o : others)
      USER_CHECK(trace != o && !same_file(trace.string(), o.string()),
                 "--trace " << c.trace << " names " << o.string() << ", which " << out->option << " " << out->path
                            << " writes too",
                 "write the trace to a file of its own, e.g. "
                     << (out->writes == Writes::Folder ? out->path + "/" : "") << "trace.json");
  }
  // train creates its --out folder, so a trace inside it is fine.
  const bool in_run_folder = out != nullptr && out->writes == Writes::Folder &&
                             trace.parent_path() == (fs::absolute(out->path) / "x").lexically_normal().parent_path();
  std::error_code ec;
  USER_CHECK(in_run_folder || fs::is_directory(trace.parent_path(), ec),
             "--trace " << c.trace << ": the folder " << trace.parent_path().string() << " does not exist",
             "create it first, or write the trace elsewhere");
}

void add_input(std::vector<Named>& inputs, const char* option, const std::string& path) {
  if (path.empty()) return;
  inputs.push_back({option, path});
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const std::vector<Named> files = files_in(inputs.back());
    inputs.insert(inputs.end(), files.begin(), files.end());
  }
}

}  // namespace

Existing what_is_at(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return {};
  std::error_code ec;
  if (S_ISDIR(st.st_mode)) {
    for (const char* name : {"metrics.jsonl", "summary.json", kLatestCheckpointName, kRunLockName})
      if (fs::exists(fs::path(path) / name, ec))
        return {Holding::RunFolder, "a train run folder (it holds " + std::string(name) + ")"};
    return {Holding::Folder, "a folder"};
  }
  const uintmax_t size = static_cast<uintmax_t>(st.st_size);
  if (!S_ISREG(st.st_mode)) return {Holding::File, "a special file"};
  if (!has_hdf5_signature(path)) return {Holding::File, sniff(path, size)};
  std::string detail;
  const std::string format = hdf5_format(path, detail);
  const std::string extra = detail.empty() ? "" : " (" + detail + ")";
  if (format == kFormatName) return {Holding::DataSet, "a ragtrain data set" + extra};
  if (format == kCheckpointFormat) return {Holding::Checkpoint, "a ragtrain checkpoint" + extra};
  if (format == "?") return {Holding::Hdf5Unknown, "an HDF5 file that cannot be opened (" + size_text(size) + ")"};
  return {Holding::Hdf5Unknown, "an HDF5 file that is not a ragtrain data set or checkpoint (" + size_text(size) + ")"};
}

void check_outputs(const RunConfig& c) {
  std::vector<Named> inputs;
  std::vector<Output> outputs;
  add_input(inputs, "--config", c.config_file);
  const std::string& cmd = c.command;
  if (cmd == "gen") {
    outputs.push_back({"--out", c.out, Writes::DataSet, "a data set"});
  } else if (cmd == "convert") {
    add_input(inputs, "INPUT", c.convert.input);
    add_input(inputs, "--labels", c.convert.labels);
    add_input(inputs, "--class-names-from", c.convert.class_names_from);
    outputs.push_back({"OUTPUT", c.convert.output, Writes::DataSet, "a data set"});
  } else if (cmd == "train") {
    // Not --resume: its checkpoints live in --out on purpose and rotation manages them.
    add_input(inputs, "--data", c.source.data);
    add_input(inputs, "--val", c.validation.data);
    add_input(inputs, "--init-from", c.start.init_from);
    outputs.push_back({"--out", c.out, Writes::Folder, "run records"});
  } else if (cmd == "tune") {
    add_input(inputs, "--data", c.source.data);
    add_input(inputs, "--val", c.validation.data);
    add_input(inputs, "--space", c.tune.space);
    outputs.push_back({"--out", c.out, Writes::Folder, "tune records"});
  } else if (cmd == "eval" || cmd == "predict") {
    add_input(inputs, "--checkpoint", c.checkpoint);
    add_input(inputs, "--data", c.source.data);
    if (!c.out.empty()) outputs.push_back({"--out", c.out, Writes::File, cmd == "eval" ? "a JSON file" : "a CSV file"});
  } else if (cmd == "bench" || cmd == "simulate") {
    add_input(inputs, "--data", c.source.data);
    if (!c.out.empty()) outputs.push_back({"--out", c.out, Writes::File, "a JSON file"});
  } else if (cmd == "plot") {
    add_input(inputs, "RUN", c.run);
    outputs.push_back({"--out", plot_config(c).out, Writes::Folder, "plots"});
  } else if (cmd == "compare") {
    for (const std::string& r : c.runs) add_input(inputs, "RUN", r);
    if (!c.out.empty())
      outputs.push_back({"--out", c.out, Writes::File, c.out.size() > 4 && c.out.substr(c.out.size() - 4) == ".csv"
                                                           ? "a CSV file"
                                                           : "a JSON file"});
  }
  if ((cmd == "train" || cmd == "bench") && !c.trace.empty()) {
    check_trace_path(c, outputs.empty() ? nullptr : &outputs.front());
    outputs.push_back({"--trace", c.trace, Writes::File, "a trace file (JSON)"});
  }

  for (const Output& out : outputs) {
    if (out.writes == Writes::Folder) {
      std::vector<std::string> names = cmd == "plot" ? plot_file_names()
                                       : cmd == "tune" ? std::vector<std::string>{kTuneRecordName, "trials.csv",
                                                                                  "best.ini", "summary.json"}
                                                       : std::vector<std::string>{kLatestCheckpointName,
                                                                                  kBestCheckpointName, "metrics.jsonl",
                                                                                  "metrics.csv", "summary.json"};
      if (cmd == "train" && c.records.write_order) names.push_back("order.csv");
      check_folder(out, names, inputs, c);
      continue;
    }
    refuse_if_input(out.option, out.path, inputs);
    const fs::path parent = fs::path(out.path).parent_path();
    refuse_if_held(inspect_run_lock(parent.empty() ? "." : parent.string()), out.option, out.path);
    check_file(out, out.path, c.force);
  }
}

}  // namespace ragtrain
