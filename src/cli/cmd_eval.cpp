// `ragtrain eval` and `ragtrain predict`: a checkpoint applied to a data set, each rank scoring a block of it.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/backend/cpu_lstm.hpp"
#include "ragtrain/checkpoint/checkpoint.hpp"
#include "ragtrain/checkpoint/rotation.hpp"
#include "ragtrain/cli/commands.hpp"
#include "ragtrain/comm/gather.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/memory.hpp"
#include "ragtrain/core/output_file.hpp"
#include "ragtrain/data/class_labels.hpp"
#include "ragtrain/data/direct_read.hpp"
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
  std::vector<std::string> names;   // predict, rank 0: the data set's sequence names (empty: it has none)
  std::string backend;          // its name, for --verbose
  int64_t sequences = 0, timesteps = 0;   // this rank's block
  int64_t pieces = 0;           // the reads it took: 1 when the block fits --max-memory, more when it streams
  int64_t piece_bytes = 0;      // streamed: the most one piece may hold
  int threads = 1;              // streamed: the reader's threads (the node's cores shared among its ranks)
};

// Called with each piece of this rank's block in turn (consecutive sequences, in file order; the whole block when
// it fits) and the model's outputs (piece size, outputs) for it.
using PieceFn = std::function<void(const Shard& piece, const std::vector<float>& outputs)>;

// Loads the checkpoint and the data set's description and checks that they fit each other. `command` (eval)
// compares with the labels, so it needs them; predict takes a data set without labels too.
Applied load_inputs(const Context& ctx, const EvalConfig& cfg, const char* command) {
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
  return a;
}

// What a streamed rank holds besides its piece: the parameters twice (the checkpoint's, the backend's), the
// outputs of its block, and for predict's rank 0 every rank's outputs and their probabilities (float + double).
int64_t held_beside_pieces(const Context& ctx, const Applied& a, int64_t block, bool predict) {
  const int64_t C = a.ckpt.shape.outputs;
  int64_t bytes = 2 * 4 * static_cast<int64_t>(a.ckpt.params.size()) + 4 * C * block;
  if (predict && ctx.is_root()) bytes += 12 * C * a.info.num_sequences;
  return bytes;
}

// This rank's block read and run through `backend` in pieces of at most `a.piece_bytes` (consecutive sequences,
// pread straight from the file, no HDF5): a block of any size within --max-memory. Collective (one agreement at
// the end): a rank whose read fails (a truncated file) stops, and every rank throws its error.
void stream_block(const Context& ctx, const std::vector<int64_t>& mine, const DirectSource& source,
                  const Normalizer& normalizer, Backend& backend, Applied& a, const PieceFn& each) {
  collective_phase(ctx, [&] {
    const int threads = a.threads;
    size_t at = 0;
    while (at < mine.size()) {
      std::vector<int64_t> piece;
      int64_t bytes = 8;
      while (at < mine.size() && bytes + shard_bytes(a.info, {mine[at]}) - 8 <= a.piece_bytes) {
        bytes += shard_bytes(a.info, {mine[at]}) - 8;
        piece.push_back(mine[at++]);
      }
      RT_CHECK(!piece.empty(), "sequence " << mine[at] << " does not fit a piece of " << a.piece_bytes << " bytes");
      Shard shard = read_shard_direct(a.info, source, piece, threads);
      normalizer.apply(shard, threads);
      each(shard, backend.infer(shard));
      ++a.pieces;
    }
  });
}

// Loads the checkpoint and this rank's block of the data and runs the model on it, handing each piece to `each`.
// A block that fits --max-memory is read whole (one piece); one that does not, on any rank, streams on every rank.
Applied apply_checkpoint(const Context& ctx, const EvalConfig& cfg, const char* command, const PieceFn& each) {
  Applied a = load_inputs(ctx, cfg, command);
  const MemoryBudget budget = MemoryBudget::of(cfg.source.max_memory, ctx.local_size);
  const std::vector<int64_t> mine = block_indices(a.info.num_sequences, ctx.size, ctx.rank);
  a.sequences = static_cast<int64_t>(mine.size());
  for (int64_t g : mine) a.timesteps += a.info.length(g);
  int fits = shard_bytes(a.info, mine) <= budget.bytes ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &fits, 1, MPI_INT, MPI_MIN, ctx.world));
  Shard shard;
  std::optional<DirectSource> source;
  collective_phase(ctx, [&] {
    if (fits) {
      shard = read_shard(a.info, mine, ctx.world, budget);
      return;
    }
    source = probe_direct(a.info, ctx.world);
    a.threads = reader_threads(ctx.world);
    USER_CHECK(source, a.info.path << ": this rank's shard (" << a.sequences << " sequence(s), " << a.timesteps
                                   << " timesteps) needs " << byte_string(static_cast<double>(shard_bytes(a.info, mine)))
                                   << " but this rank may use " << byte_string(static_cast<double>(budget.bytes))
                                   << " (--max-memory " << budget.max_memory << "), and it cannot be read in pieces: "
                                   << "/features or /labels is chunked, compressed or not little-endian",
               "rewrite it contiguous (`h5repack -l CONTI " << a.info.path << " OUT.h5`), raise --max-memory, or use "
               "more ranks");
    a.piece_bytes = budget.bytes - held_beside_pieces(ctx, a, a.sequences, std::string(command) == "predict");
    int64_t largest = 0;
    for (int64_t g : mine) largest = std::max(largest, shard_bytes(a.info, {g}));
    USER_CHECK(largest <= a.piece_bytes,
               "--data " << a.info.path << ": reading it in pieces needs room for its longest sequence ("
                         << byte_string(static_cast<double>(largest)) << ") beside the model and the outputs ("
                         << byte_string(static_cast<double>(budget.bytes - a.piece_bytes)) << "), but --max-memory is "
                         << budget.max_memory,
               "raise --max-memory, or use more ranks");
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
  const Normalizer normalizer{parse_normalization(a.ckpt.normalization),
                              FeatureScaling{a.ckpt.feature_mean, a.ckpt.feature_std}};
  BackendOptions opts;
  opts.device = cfg.device;
  opts.comm = ctx.world;
  opts.local_rank = ctx.local_rank;
  std::unique_ptr<Backend> backend;
  collective_phase(ctx, [&] { backend = make_backend(a.ckpt.shape, opts); });
  backend->set_params(a.ckpt.params);
  a.backend = backend->name();
  if (source) {
    stream_block(ctx, mine, *source, normalizer, *backend, a, each);
  } else {
    normalizer.apply(shard);
    each(shard, backend->infer(shard));
    a.pieces = 1;
  }
  return a;
}

// --verbose: the model and how the sequences were spread over the ranks (collective: every rank calls it).
void describe(const Context& ctx, const EvalConfig& cfg, const Applied& a) {
  if (!cfg.talk.verbose) return;
  const int64_t mine[4] = {a.sequences, a.timesteps, a.pieces, a.piece_bytes};
  std::vector<int64_t> all(ctx.is_root() ? 4 * static_cast<size_t>(ctx.size) : 0);
  MPI_CHECK(MPI_Gather(mine, 4, MPI_INT64_T, all.data(), 4, MPI_INT64_T, 0, ctx.world));
  if (!ctx.is_root()) return;
  const ModelShape& m = a.ckpt.shape;
  std::printf("# model: %s, %s parameters, %s, normalisation %s, backend %s\n", ragtrain::describe(m).c_str(),
              si_number(static_cast<double>(a.ckpt.params.size())).c_str(), task_name(m.task),
              a.ckpt.normalization == "feature"  ? "feature (the training set's statistics)"
              : a.ckpt.normalization == "series" ? "series (each sequence by its own)"
                                                 : "none",
              a.backend.c_str());
  for (int r = 0; r < ctx.size; ++r) {
    const int64_t* v = all.data() + 4 * static_cast<size_t>(r);
    std::printf("# rank %d: %lld sequences, %lld timesteps", r, static_cast<long long>(v[0]), static_cast<long long>(v[1]));
    if (v[3] > 0)   // streamed: the block did not fit --max-memory
      std::printf(", read in %lld pieces of at most %s", static_cast<long long>(v[2]),
                  byte_string(static_cast<double>(v[3])).c_str());
    std::printf("\n");
  }
}

// Sums an int64 array over the ranks in place, in pieces that fit MPI's int count.
void allreduce_sum(std::vector<int64_t>& v, MPI_Comm comm) {
  for (size_t at = 0; at < v.size(); at += INT_MAX / 2)
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v.data() + at, static_cast<int>(std::min<size_t>(INT_MAX / 2, v.size() - at)),
                            MPI_INT64_T, MPI_SUM, comm));
}

}  // namespace

int run_eval(const Context& ctx, const EvalConfig& cfg) {
  // Scored piece by piece in the block's order, so the sums are those of the whole block read at once.
  EvalTotals local;
  std::optional<ConfusionMatrix> confusion;
  std::optional<TargetErrors> errors;
  const Applied a = apply_checkpoint(ctx, cfg, "eval", [&](const Shard& piece, const std::vector<float>& outputs) {
    const int64_t C = piece.num_outputs;
    const bool classification = piece.task == Task::Classification;
    if (!confusion) confusion.emplace(classification ? C : 1);
    if (!errors) errors.emplace(classification ? 1 : C);
    score_into(local, piece, outputs);
    for (int64_t p = 0; p < piece.size(); ++p) {
      const float* out = outputs.data() + p * C;
      if (classification)
        confusion->add(piece.labels[static_cast<size_t>(p)], argmax(out, C));
      else
        errors->add(out, piece.target(p));
    }
  });
  if (ctx.is_root() && !cfg.talk.quiet)   // --quiet: the result lines alone
    std::printf("# eval %s on %s (%lld sequences, %d rank%s)\n", a.path.c_str(), cfg.source.data.c_str(),
                static_cast<long long>(a.info.num_sequences), ctx.size, ctx.size == 1 ? "" : "s");
  describe(ctx, cfg, a);
  const EvalTotals t = allreduce(local, ctx.world);
  const int64_t C = a.ckpt.shape.outputs;
  const bool classification = a.info.task == Task::Classification;
  if (!confusion) confusion.emplace(classification ? C : 1);   // a rank with no sequences
  if (!errors) errors.emplace(classification ? 1 : C);

  // Per-class counts and per-target sums of the blocks, added over all ranks.
  if (classification) {
    allreduce_sum(confusion->counts(), ctx.world);
  } else {
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, errors->sums().data(), static_cast<int>(errors->sums().size()), MPI_DOUBLE,
                            MPI_SUM, ctx.world));
  }

  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    if (classification) {
      std::printf("loss %.6f\naccuracy %.4f (%lld/%lld)\n", t.loss(), confusion->accuracy(),
                  static_cast<long long>(confusion->correct()), static_cast<long long>(confusion->total()));
      if (!cfg.talk.quiet) std::printf("\n%s", format_classification_report(*confusion, a.ckpt.class_names).c_str());
    } else {
      std::printf("mse %.6f\nmae %.6f\n", errors->mse(), errors->mae());
      if (!cfg.talk.quiet) std::printf("\n%s", format_regression_report(*errors).c_str());
    }
    if (!cfg.out.empty()) {
      Json j{{"checkpoint", a.path}, {"data", cfg.source.data},
             {"task", task_name(a.info.task)}, {"sequences", static_cast<int64_t>(t.count)},
             {"ranks", ctx.size},           {"loss", t.loss()}};
      j.update(classification ? classification_json(*confusion, a.ckpt.class_names) : regression_json(*errors));
      write_json_atomic(cfg.out, j);
      if (!cfg.talk.quiet) std::printf("\nwrote %s\n", cfg.out.c_str());
    }
    std::fflush(stdout);
  });
  return kExitOk;
}

int run_predict(const Context& ctx, const EvalConfig& cfg) {
  std::vector<float> outputs;   // (this rank's block, outputs), the pieces in order
  const Applied a = apply_checkpoint(ctx, cfg, "predict", [&](const Shard&, const std::vector<float>& piece) {
    outputs.insert(outputs.end(), piece.begin(), piece.end());
  });
  describe(ctx, cfg, a);
  const int64_t C = a.ckpt.shape.outputs;

  // Blocks are contiguous and in rank order, so gathering in rank order gives the file's order. Counted in
  // int64_t: sequences x outputs passes 2^31 long before memory runs out.
  const std::vector<float> all = gather_to_root(outputs, ctx.world);

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
