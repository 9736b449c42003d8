// `ragtrain gen`, `convert` and `inspect`: making and checking data files. Serial work, done by rank 0.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "ragtrain/cli/commands.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/output_file.hpp"
#include "ragtrain/data/direct_read.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/importers.hpp"
#include "ragtrain/data/inspect.hpp"
#include "ragtrain/data/stored_statistics.hpp"
#include "ragtrain/data/synthetic.hpp"

namespace ragtrain {

int run_gen(const Context& ctx, const GenConfig& cfg) {
  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    const RaggedData data = make_synthetic(cfg.spec, reader_threads(MPI_COMM_SELF));
    write_dataset(cfg.out, data);
    if (!cfg.talk.quiet)
      std::printf("wrote %s: %lld sequences, F=%lld, lengths %lld..%lld, %s\n", cfg.out.c_str(),
                  static_cast<long long>(data.num_sequences()), static_cast<long long>(data.num_features),
                  static_cast<long long>(cfg.spec.min_length), static_cast<long long>(cfg.spec.max_length),
                  task_name(data.task));
  });
  return kExitOk;
}

namespace {

enum class InputKind { Ts, Npz, CsvFolder };

const char* const kInputKinds =
    "a UEA/sktime .ts file, a NumPy .npz file (numpy.savez) or a folder of CSV files (one per sequence)";

// Why an input of extension `ext` (lower case) is not one of those, naming what it probably is.
std::string unknown_input_why(const std::string& ext) {
  if (ext == ".parquet" || ext == ".feather" || ext == ".arrow" || ext == ".pkl" || ext == ".pickle")
    return "a " + ext + " file (pandas/Arrow) is not among them";
  if (ext == ".csv") return "a single .csv file is not among them (one file per sequence, in a folder)";
  if (ext == ".npy") return "a single .npy array (numpy.save) is not among them";
  if (ext == ".h5" || ext == ".hdf5") return "this HDF5 file is an output format, not an input of convert";
  if (ext == ".tsv") return "a .tsv file (the UCR archive's format) is not among them";
  if (ext == ".arff") return "a .arff file (Weka) is not among them";
  return ext.empty() ? "a file without an extension is not among them"
                     : "a " + ext + " file is not among them";
}

// How to get from such a file to one convert reads: a few lines of the tool that most likely wrote it.
std::string unknown_input_hint(const std::string& ext) {
  const std::string npz_from_long =
      "with pandas, from a long table with one row per timestep (columns id, time, features...): "
      "g = [x.sort_values(\"time\") for _, x in df.groupby(\"id\")]; numpy.savez(\"data.npz\", "
      "values=numpy.concatenate([x[features].to_numpy(\"float32\") for x in g]), lengths=[len(x) for x in g], "
      "labels=[x[\"label\"].iloc[0] for x in g]) (leave out labels for data without labels); then ragtrain "
      "convert data.npz OUT.h5. doc/data-format.md, \"Bring your own data\", has the layouts";
  if (ext == ".parquet" || ext == ".feather" || ext == ".arrow" || ext == ".pkl" || ext == ".pickle" || ext == ".csv")
    return "read it with pandas (pandas.read_" +
           std::string(ext == ".csv" ? "csv" : ext == ".pkl" || ext == ".pickle" ? "pickle" : ext == ".parquet" ? "parquet" : "feather") +
           "), then write an .npz: " + npz_from_long;
  if (ext == ".npy")
    return "save the sequences and labels together with numpy.savez: numpy.savez(\"data.npz\", **{f\"seq_{i}\": a "
           "for i, a in enumerate(seqs)}, labels=y), or values + lengths (doc/data-format.md, \"NumPy .npz\")";
  if (ext == ".h5" || ext == ".hdf5")
    return "if it is already a ragtrain data set, use it directly (`ragtrain inspect FILE` checks it); otherwise "
           "read it with h5py and write format v1 as doc/data-format.md shows";
  if (ext == ".tsv")
    return "tools/ucr_tsv_to_ts.py turns a UCR .tsv file into a .ts file (it removes the NaN padding); or convert "
           "the .ts file the archive publishes for the same set (--missing trim drops NaN padding)";
  if (ext == ".arff")
    return "the UEA archive publishes every .arff data set as a .ts file too; convert that one";
  return "export to an .npz file with numpy (numpy.savez(\"data.npz\", values=..., lengths=..., labels=...)) or "
         "to a folder of CSV files; " + npz_from_long;
}

// What `convert` reads, from the path alone: a folder is CSV files, otherwise the extension decides.
InputKind input_kind(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return InputKind::CsvFolder;
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (ext == ".npz") return InputKind::Npz;
  if (ext == ".ts") return InputKind::Ts;
  USER_CHECK(std::filesystem::exists(path, ec), path << ": no such file or folder", "check the INPUT path");
  throw UserError(RT_MSG(path << ": convert reads " << kInputKinds << "; " << unknown_input_why(ext)),
                  unknown_input_hint(ext));
}

std::string joined(const std::vector<std::string>& items, size_t max_items) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < max_items; ++i) s += (i ? ", " : "") + items[i];
  if (items.size() > max_items) s += ", ... (" + std::to_string(items.size() - max_items) + " more)";
  return s;
}

// convert's result line, and what --missing did.
void print_converted(const std::string& output, const RaggedData& data, const MissingReport& missing) {
  int64_t shortest = data.offsets[1], longest = 0;
  for (int64_t i = 0; i < data.num_sequences(); ++i) {
    const int64_t n = data.offsets[static_cast<size_t>(i + 1)] - data.offsets[static_cast<size_t>(i)];
    shortest = std::min(shortest, n);
    longest = std::max(longest, n);
  }
  std::string task;
  if (!data.labeled)
    task = "no labels (for predict and inspect; train and eval need labels)";
  else if (data.task == Task::Classification)
    task = std::to_string(data.num_outputs) + " classes" +
           (data.class_names.empty() ? "" : " (" + joined(data.class_names, 10) + ")");
  else
    task = "regression, " + std::to_string(data.num_outputs) + " target(s)";
  if (!missing.summary().empty()) std::printf("%s\n", missing.summary().c_str());
  std::printf("wrote %s: %lld sequences, F=%lld, lengths %lld..%lld, %s\n", output.c_str(),
              static_cast<long long>(data.num_sequences()), static_cast<long long>(data.num_features),
              static_cast<long long>(shortest), static_cast<long long>(longest), task.c_str());
}

}  // namespace

int run_convert(const Context& ctx, const ConvertConfig& cfg) {
  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    const InputKind kind = input_kind(cfg.convert.input);
    USER_CHECK(kind == InputKind::CsvFolder || cfg.convert.labels.empty(),
               "--labels " << cfg.convert.labels << ": labels files are for a folder of CSV files; "
                           << cfg.convert.input << " holds its own labels",
               "leave --labels out");
    USER_CHECK(
        kind != InputKind::Ts || (!cfg.convert.regression && cfg.convert.class_names_from.empty()),
        cfg.convert.input << ": a .ts file declares its task and classes in its header (@classLabel, @targetLabel); "
                             "--regression and --class-names-from do not apply",
        "leave them out");
    ImportOptions opts;
    opts.regression = cfg.convert.regression;
    opts.missing = cfg.convert.missing;
    if (!cfg.convert.class_names_from.empty()) {
      // Only the header of the reference file is read (its attributes and offsets), on this rank alone.
      const DatasetInfo ref = read_dataset_info(cfg.convert.class_names_from, MPI_COMM_SELF);
      USER_CHECK(ref.labeled, "--class-names-from " << cfg.convert.class_names_from << ": has no labels, so no classes",
                 "pass the converted training set, which has labels");
      USER_CHECK(
          ref.task == Task::Classification,
          "--class-names-from " << cfg.convert.class_names_from << ": is a regression data set; it has no classes",
          "pass the converted training set of a classification task");
      opts.class_names = ref.class_names;
      for (int64_t c = static_cast<int64_t>(opts.class_names.size()); c < ref.num_outputs; ++c)
        opts.class_names.push_back(std::to_string(c));   // a file without class_names: its classes are the ids
      opts.class_names_source = cfg.convert.class_names_from;
    }

    ImportLog log;
    const RaggedData data = kind == InputKind::Ts ? read_ts_file(cfg.convert.input, opts.missing, &log)
                            : kind == InputKind::Npz
                                ? read_npz_file(cfg.convert.input, opts, &log)
                                : read_csv_folder(cfg.convert.input, cfg.convert.labels, opts, &log);
    USER_CHECK(data.labeled || (!cfg.convert.regression && cfg.convert.class_names_from.empty()),
               cfg.convert.input << ": has no labels; --regression and --class-names-from describe labels",
               "leave them out to convert a data set without labels (for predict), or add the labels");
    if (cfg.talk.verbose)
      for (const std::string& r : log.read) std::printf("read %s\n", r.c_str());
    if (!cfg.talk.quiet && !log.ignored.empty())
      std::printf("ignored %zu %s: %s\n", log.ignored.size(), kind == InputKind::Npz ? "array(s)" : "file(s)",
                  joined(log.ignored, cfg.talk.verbose ? log.ignored.size() : 5).c_str());
    write_dataset(cfg.convert.output, data);
    if (!cfg.talk.quiet) print_converted(cfg.convert.output, data, log.missing);
  });
  return kExitOk;
}

namespace {

// /statistics of the file at `path` replaced without changing the file in place: a copy in its folder (its mode,
// and its owner where the user may give it away, kept) gets the new group and is renamed over it. A kill or a
// failure midway leaves the file as it was, never without its statistics or with half of them; the cost is room
// for a second copy. A link is followed: the file it names is replaced, the link stays.
void replace_statistics(const std::string& path, const StoredStatistics& stats) {
  std::error_code ec;
  const std::string target = std::filesystem::canonical(path, ec).string();
  struct stat st {};
  USER_CHECK(!ec && ::stat(target.c_str(), &st) == 0, path << ": cannot be found any more to write its statistics",
             "check that no other program moved or removed it, then run inspect again");
  AtomicOutput out(target);
  std::filesystem::copy_file(target, out.temp_path(), std::filesystem::copy_options::overwrite_existing, ec);
  if (!ec && ::chmod(out.temp_path().c_str(), st.st_mode & 07777) != 0) ec.assign(errno, std::generic_category());
  USER_CHECK(!ec, path << ": cannot write its statistics: its copy '" << out.temp_path() << "' could not be made ("
                       << ec.message() << ")",
             "--write-statistics writes a copy of the file in its folder and renames it over the file: make the folder "
             "writable, with room for a second copy, or copy the file to such a folder and run inspect there; the file "
             "is unchanged");
  if (::chown(out.temp_path().c_str(), st.st_uid, st.st_gid) != 0) {
    // Only root may give a file to another owner; anyone else keeps the copy as their own, as a rewrite would.
    // (An if, not a (void) cast: with _FORTIFY_SOURCE, Ubuntu's default, g++ warns about a cast-away result.)
  }
  store_statistics(out.temp_path(), stats);
  out.commit();
}

}  // namespace

int run_inspect(const Context& ctx, const InspectConfig& cfg) {
  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    const std::string& path = cfg.source.data;
    // With --write-statistics the stored ones are about to be replaced: statistics that would not even open
    // (another row count, a damaged group) do not stop the check, and the file is checked as one without them.
    DatasetReport report = inspect_dataset(path, MemoryBudget::of(cfg.source.max_memory, ctx.local_size),
                                           !cfg.write_statistics);
    if (cfg.write_statistics) {
      report.stored = to_stored(report.moments, report.total_timesteps);
      replace_statistics(path, *report.stored);
    }
    if (!cfg.talk.quiet) print_report(report, std::cout);
    USER_CHECK(!report.stale, path << ": the feature statistics stored in the file (/statistics) do not match its data: "
                                   << *report.stale << " (the file was changed after they were written)",
               "rewrite them with `ragtrain inspect " << path << " --write-statistics`");
    std::cout << "valid: yes\n";
    std::cout.flush();
  });
  return kExitOk;
}

}  // namespace ragtrain
