// `ragtrain eval` and `ragtrain predict`: a checkpoint applied to a data set, each rank scoring a block of it.
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/backend/cpu_lstm.hpp"
#include "ragtrain/checkpoint/checkpoint.hpp"
#include "ragtrain/cli/commands.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/metrics/evaluation.hpp"
#include "ragtrain/metrics/metrics.hpp"
#include "ragtrain/schedule/schedule.hpp"

namespace ragtrain {

namespace {

struct Applied {
  Checkpoint ckpt;
  DatasetInfo info;
  Shard shard;
  std::vector<float> outputs;   // (shard.size(), outputs)
};

// Loads the checkpoint and this rank's block of the data, checks they fit, runs the model.
Applied apply_checkpoint(const Context& ctx, const RunConfig& cfg) {
  Applied a;
  collective_phase(ctx, [&] {
    a.ckpt = read_checkpoint(cfg.checkpoint);
    a.info = read_dataset_info(cfg.data, ctx.world);
    const ModelShape& m = a.ckpt.shape;
    USER_CHECK(a.info.num_features == m.input_size,
               "data file '" << cfg.data << "' has " << a.info.num_features << " features per timestep, the model in '"
                             << cfg.checkpoint << "' expects " << m.input_size,
               "evaluate with data prepared like the training set");
    USER_CHECK(a.info.task == m.task && a.info.num_outputs == m.outputs,
               "data file '" << cfg.data << "' is " << task_name(a.info.task) << " with " << a.info.num_outputs
                             << " outputs, the model in '" << cfg.checkpoint << "' is " << task_name(m.task) << " with "
                             << m.outputs,
               "use the checkpoint trained for this data");
  });
  collective_phase(ctx, [&] {
    a.shard = read_shard(a.info, block_indices(a.info.num_sequences, ctx.size, ctx.rank), ctx.world);
  });
  apply_scaling(FeatureScaling{a.ckpt.feature_mean, a.ckpt.feature_std}, a.shard);
  BackendOptions opts;
  opts.device = cfg.device;
  opts.comm = ctx.world;
  opts.local_rank = ctx.local_rank;
  std::unique_ptr<Backend> backend;
  collective_phase(ctx, [&] { backend = make_backend(a.ckpt.shape, opts); });
  backend->set_params(a.ckpt.params);
  a.outputs = backend->infer(a.shard);
  return a;
}

}  // namespace

int run_eval(const Context& ctx, const RunConfig& cfg) {
  const Applied a = apply_checkpoint(ctx, cfg);
  const EvalTotals t = allreduce(score(a.shard, a.outputs), ctx.world);
  if (ctx.is_root()) {
    std::printf("# eval %s on %s (%lld sequences, %d ranks)\n", cfg.checkpoint.c_str(), cfg.data.c_str(),
                static_cast<long long>(t.count), ctx.size);
    if (a.info.task == Task::Classification)
      std::printf("loss %.6f\naccuracy %.4f (%lld/%lld)\n", t.loss(), t.accuracy(), static_cast<long long>(t.correct),
                  static_cast<long long>(t.count));
    else
      std::printf("mse %.6f\nmae %.6f\n", t.loss(), t.mae());
    std::fflush(stdout);
  }
  return kExitOk;
}

int run_predict(const Context& ctx, const RunConfig& cfg) {
  const Applied a = apply_checkpoint(ctx, cfg);
  const int64_t C = a.ckpt.shape.outputs;

  // Blocks are contiguous and in rank order, so gathering in rank order gives the file's order.
  const int local = static_cast<int>(a.outputs.size());
  std::vector<int> counts(static_cast<size_t>(ctx.size)), displs(static_cast<size_t>(ctx.size));
  MPI_CHECK(MPI_Gather(&local, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, ctx.world));
  std::vector<float> all;
  if (ctx.is_root()) {
    int total = 0;
    for (int r = 0; r < ctx.size; ++r) {
      displs[static_cast<size_t>(r)] = total;
      total += counts[static_cast<size_t>(r)];
    }
    all.resize(static_cast<size_t>(total));
  }
  MPI_CHECK(MPI_Gatherv(a.outputs.data(), local, MPI_FLOAT, all.data(), counts.data(), displs.data(), MPI_FLOAT, 0,
                        ctx.world));

  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    const std::string tmp = cfg.out + ".tmp." + std::to_string(::getpid());
    std::ofstream out(tmp);
    USER_CHECK(out.good(), "cannot create '" << cfg.out << "'", "choose a writable --out path");
    const int64_t n = a.info.num_sequences;
    if (a.info.task == Task::Classification) {
      const std::vector<double> prob = softmax_rows(all, C);
      out << "index,predicted";
      for (int64_t j = 0; j < C; ++j)
        out << ",p_" << (static_cast<int64_t>(a.ckpt.class_names.size()) == C ? a.ckpt.class_names[static_cast<size_t>(j)] : std::to_string(j));
      out << "\n";
      char buf[32];
      for (int64_t i = 0; i < n; ++i) {
        out << i << "," << argmax(all.data() + i * C, C);
        for (int64_t j = 0; j < C; ++j) {
          std::snprintf(buf, sizeof buf, ",%.6g", prob[static_cast<size_t>(i * C + j)]);
          out << buf;
        }
        out << "\n";
      }
    } else {
      out << "index";
      for (int64_t j = 0; j < C; ++j) out << ",y_" << j;
      out << "\n";
      char buf[32];
      for (int64_t i = 0; i < n; ++i) {
        out << i;
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
    commit_file(tmp, cfg.out);
    if (!cfg.quiet) std::printf("wrote %lld predictions to %s\n", static_cast<long long>(n), cfg.out.c_str());
  });
  return kExitOk;
}

}  // namespace ragtrain
