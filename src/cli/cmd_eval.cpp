// `ragtrain eval` and `ragtrain predict`: a checkpoint applied to a data set, each rank scoring a block of it.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/backend/cpu_lstm.hpp"
#include "ragtrain/checkpoint/checkpoint.hpp"
#include "ragtrain/checkpoint/rotation.hpp"
#include "ragtrain/cli/commands.hpp"
#include "ragtrain/comm/gather.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/output_file.hpp"
#include "ragtrain/data/class_labels.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/names.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/metrics/confusion.hpp"
#include "ragtrain/metrics/evaluation.hpp"
#include "ragtrain/metrics/metrics.hpp"
#include "ragtrain/metrics/target_errors.hpp"
#include "ragtrain/metrics/units.hpp"
#include "ragtrain/schedule/schedule.hpp"

namespace ragtrain {

namespace {

struct Applied {
  std::string path;             // the checkpoint file (--checkpoint, or the one a run folder holds)
  Checkpoint ckpt;
  DatasetInfo info;
  Shard shard;
  std::vector<float> outputs;   // (shard.size(), outputs)
  std::vector<std::string> names;   // predict, rank 0: the data set's sequence names (empty: it has none)
  std::string backend;          // its name, for --verbose
};

// Loads the checkpoint and this rank's block of the data, checks they fit, runs the model. `command` (eval)
// compares with the labels, so it needs them; predict takes a data set without labels too.
Applied apply_checkpoint(const Context& ctx, const EvalConfig& cfg, const char* command) {
  const bool needs_labels = std::string(command) == "eval";
  Applied a;
  collective_phase(ctx, [&] {
    a.path = resolve_model_path(cfg.checkpoint);
    a.ckpt = read_checkpoint(a.path);
    a.info = read_dataset_info(cfg.source.data, ctx.world, MemoryBudget::of(cfg.source.max_memory, ctx.local_size));
    if (needs_labels) require_labels(a.info, "--data", "eval (which compares predictions with labels)");
    const ModelShape& m = a.ckpt.shape;
    USER_CHECK(a.info.num_features == m.input_size,
               "data file '" << cfg.source.data << "' has " << a.info.num_features
                             << " features per timestep, the model in '" << a.path << "' expects " << m.input_size,
               "evaluate with data prepared like the training set");
    USER_CHECK(!a.info.labeled || (a.info.task == m.task && a.info.num_outputs == m.outputs),
               "data file '" << cfg.source.data << "' is " << task_name(a.info.task) << " with " << a.info.num_outputs
                             << " outputs, the model in '" << a.path << "' is " << task_name(m.task) << " with "
                             << m.outputs,
               (m.task == Task::Classification && a.info.task == m.task
                    ? "use the checkpoint trained for this data; a test set that lacks some classes keeps the training "
                      "set's numbering when converted with --class-names-from TRAIN.h5 (the converted training set)"
                    : "use the checkpoint trained for this data"));
    if (needs_labels)   // eval compares the data's class ids with the model's
      require_same_class_names(a.info.class_names, "data file '" + cfg.source.data + "'", a.ckpt.class_names,
                               "the model in '" + a.path + "'");
    // predict's first column, read (and checked) before any work, by the rank that writes the file.
    if (!needs_labels && ctx.is_root() && a.info.has_names)
      a.names = read_sequence_names(a.info, MemoryBudget::of(cfg.source.max_memory, ctx.local_size));
  });
  collective_phase(ctx, [&] {
    a.shard = read_shard(a.info, block_indices(a.info.num_sequences, ctx.size, ctx.rank), ctx.world,
                         MemoryBudget::of(cfg.source.max_memory, ctx.local_size));
  });
  if (ctx.is_root() && a.path != cfg.checkpoint && !cfg.talk.quiet) {   // a run folder: say which of its models
    if (a.ckpt.best.step >= 0 && a.path.size() >= 7 && a.path.compare(a.path.size() - 7, 7, kBestCheckpointName) == 0)
      std::printf("# model: %s, the run's best validation (epoch %lld, step %lld; the last is %s/%s)\n",
                  a.path.c_str(), static_cast<long long>(a.ckpt.best.epoch), static_cast<long long>(a.ckpt.best.step),
                  cfg.checkpoint.c_str(), kLatestCheckpointName);
    else
      std::printf("# model: %s, the run's last (the folder has no %s: %s)\n", a.path.c_str(), kBestCheckpointName,
                  a.ckpt.best.step < 0 ? "the run had no --val" : "its best model is not at hand");
    std::fflush(stdout);
  }
  // The standardisation the model was trained with (none, the training set's statistics, or per series).
  Normalizer{parse_normalization(a.ckpt.normalization), FeatureScaling{a.ckpt.feature_mean, a.ckpt.feature_std}}
      .apply(a.shard);
  BackendOptions opts;
  opts.device = cfg.device;
  opts.comm = ctx.world;
  opts.local_rank = ctx.local_rank;
  std::unique_ptr<Backend> backend;
  collective_phase(ctx, [&] { backend = make_backend(a.ckpt.shape, opts); });
  backend->set_params(a.ckpt.params);
  a.outputs = backend->infer(a.shard);
  a.backend = backend->name();
  return a;
}

// --verbose: the model and how the sequences were spread over the ranks (collective: every rank calls it).
void describe(const Context& ctx, const EvalConfig& cfg, const Applied& a) {
  if (!cfg.talk.verbose) return;
  const int64_t mine[2] = {a.shard.size(), a.shard.timesteps()};
  std::vector<int64_t> all(ctx.is_root() ? 2 * static_cast<size_t>(ctx.size) : 0);
  MPI_CHECK(MPI_Gather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, 0, ctx.world));
  if (!ctx.is_root()) return;
  const ModelShape& m = a.ckpt.shape;
  std::printf("# model: %s, %s parameters, %s, normalisation %s, backend %s\n", ragtrain::describe(m).c_str(),
              si_number(static_cast<double>(a.ckpt.params.size())).c_str(), task_name(m.task),
              a.ckpt.normalization == "feature"  ? "feature (the training set's statistics)"
              : a.ckpt.normalization == "series" ? "series (each sequence by its own)"
                                                 : "none",
              a.backend.c_str());
  for (int r = 0; r < ctx.size; ++r)
    std::printf("# rank %d: %lld sequences, %lld timesteps\n", r, static_cast<long long>(all[2 * static_cast<size_t>(r)]),
                static_cast<long long>(all[2 * static_cast<size_t>(r) + 1]));
}

// Sums an int64 array over the ranks in place, in pieces that fit MPI's int count.
void allreduce_sum(std::vector<int64_t>& v, MPI_Comm comm) {
  for (size_t at = 0; at < v.size(); at += INT_MAX / 2)
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v.data() + at, static_cast<int>(std::min<size_t>(INT_MAX / 2, v.size() - at)),
                            MPI_INT64_T, MPI_SUM, comm));
}

}  // namespace

int run_eval(const Context& ctx, const EvalConfig& cfg) {
  const Applied a = apply_checkpoint(ctx, cfg, "eval");
  if (ctx.is_root() && !cfg.talk.quiet)   // --quiet: the result lines alone
    std::printf("# eval %s on %s (%lld sequences, %d rank%s)\n", a.path.c_str(), cfg.source.data.c_str(),
                static_cast<long long>(a.info.num_sequences), ctx.size, ctx.size == 1 ? "" : "s");
  describe(ctx, cfg, a);
  const EvalTotals t = allreduce(score(a.shard, a.outputs), ctx.world);
  const int64_t C = a.ckpt.shape.outputs;
  const bool classification = a.info.task == Task::Classification;

  // Per-class counts and per-target sums of this rank's block, added over all ranks.
  ConfusionMatrix confusion(classification ? C : 1);
  TargetErrors errors(classification ? 1 : C);
  for (int64_t p = 0; p < a.shard.size(); ++p) {
    const float* out = a.outputs.data() + p * C;
    if (classification)
      confusion.add(a.shard.labels[static_cast<size_t>(p)], argmax(out, C));
    else
      errors.add(out, a.shard.target(p));
  }
  if (classification) {
    allreduce_sum(confusion.counts(), ctx.world);
  } else {
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, errors.sums().data(), static_cast<int>(errors.sums().size()), MPI_DOUBLE,
                            MPI_SUM, ctx.world));
  }

  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    if (classification) {
      std::printf("loss %.6f\naccuracy %.4f (%lld/%lld)\n", t.loss(), confusion.accuracy(),
                  static_cast<long long>(confusion.correct()), static_cast<long long>(confusion.total()));
      if (!cfg.talk.quiet) std::printf("\n%s", format_classification_report(confusion, a.ckpt.class_names).c_str());
    } else {
      std::printf("mse %.6f\nmae %.6f\n", errors.mse(), errors.mae());
      if (!cfg.talk.quiet) std::printf("\n%s", format_regression_report(errors).c_str());
    }
    if (!cfg.out.empty()) {
      Json j{{"checkpoint", a.path}, {"data", cfg.source.data},
             {"task", task_name(a.info.task)}, {"sequences", static_cast<int64_t>(t.count)},
             {"ranks", ctx.size},           {"loss", t.loss()}};
      j.update(classification ? classification_json(confusion, a.ckpt.class_names) : regression_json(errors));
      write_json_atomic(cfg.out, j);
      if (!cfg.talk.quiet) std::printf("\nwrote %s\n", cfg.out.c_str());
    }
    std::fflush(stdout);
  });
  return kExitOk;
}

int run_predict(const Context& ctx, const EvalConfig& cfg) {
  const Applied a = apply_checkpoint(ctx, cfg, "predict");
  describe(ctx, cfg, a);
  const int64_t C = a.ckpt.shape.outputs;

  // Blocks are contiguous and in rank order, so gathering in rank order gives the file's order. Counted in
  // int64_t: sequences x outputs passes 2^31 long before memory runs out.
  const std::vector<float> all = gather_to_root(a.outputs, ctx.world);

  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    // The data set's names of its sequences, when it has them (convert stores file names or positions): the
    // first column, so that a row can be matched to its input without rebuilding the file's order.
    const std::vector<std::string>& names = a.names;
    const auto row_start = [&](int64_t i) {
      return names.empty() ? std::to_string(i) : csv_field(names[static_cast<size_t>(i)]) + "," + std::to_string(i);
    };
    const char* const header_start = names.empty() ? "index" : "name,index";
    AtomicOutput file(cfg.out);   // removed unless committed: a failed write leaves the previous file or none
    const std::string& tmp = file.temp_path();
    std::ofstream out(tmp);
    USER_CHECK(out.good(), "cannot create '" << cfg.out << "' (as " << tmp << "): " << std::strerror(errno),
               "choose a writable --out path in an existing folder (the name plus ~12 characters must fit the file "
               "system's limit, usually 255)");
    const int64_t n = a.info.num_sequences;
    if (a.ckpt.shape.task == Task::Classification) {   // the model's: a data set may have no labels
      const std::vector<double> prob = softmax_rows(all, C);
      // A class is named as the training data named it (so "predicted" and the p_ columns agree), else by its id.
      const bool named = static_cast<int64_t>(a.ckpt.class_names.size()) == C;
      auto class_name = [&](int64_t j) { return named ? a.ckpt.class_names[static_cast<size_t>(j)] : std::to_string(j); };
      out << header_start << ",predicted";
      for (int64_t j = 0; j < C; ++j) out << "," << csv_field("p_" + class_name(j));
      out << "\n";
      char buf[32];
      for (int64_t i = 0; i < n; ++i) {
        out << row_start(i) << "," << csv_field(class_name(argmax(all.data() + i * C, C)));
        for (int64_t j = 0; j < C; ++j) {
          std::snprintf(buf, sizeof buf, ",%.6g", prob[static_cast<size_t>(i * C + j)]);
          out << buf;
        }
        out << "\n";
      }
    } else {
      out << header_start;
      for (int64_t j = 0; j < C; ++j) out << ",y_" << j;
      out << "\n";
      char buf[32];
      for (int64_t i = 0; i < n; ++i) {
        out << row_start(i);
        for (int64_t j = 0; j < C; ++j) {
          std::snprintf(buf, sizeof buf, ",%.8g", all[static_cast<size_t>(i * C + j)]);
          out << buf;
        }
        out << "\n";
      }
    }
    out.flush();
    USER_CHECK(out.good(), "writing '" << tmp << "' failed (disk full?)", "free space where --out points");
    out.close();
    file.commit();
    if (!cfg.talk.quiet) std::printf("wrote %lld predictions to %s\n", static_cast<long long>(n), cfg.out.c_str());
  });
  return kExitOk;
}

}  // namespace ragtrain
