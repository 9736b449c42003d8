// `ragtrain gen`, `convert` and `inspect`: making and checking data files. Serial work, done by rank 0.
#include <cstdio>
#include <iostream>

#include "ragtrain/cli/commands.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/data/dataset.hpp"

namespace ragtrain {

int run_gen(const Context& ctx, const RunConfig& cfg) {
  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    SyntheticSpec spec;
    spec.sequences = cfg.sequences;
    spec.features = cfg.features;
    spec.min_length = cfg.min_length;
    spec.max_length = cfg.max_length;
    spec.classes = cfg.classes;
    spec.task = cfg.task == "regression" ? Task::Regression : Task::Classification;
    spec.outputs = cfg.outputs;
    spec.seed = cfg.seed;
    const RaggedData data = make_synthetic(spec);
    write_dataset(cfg.out, data);
    if (!cfg.quiet)
      std::printf("wrote %s: %lld sequences, F=%lld, lengths %lld..%lld, %s\n", cfg.out.c_str(),
                  static_cast<long long>(data.num_sequences()), static_cast<long long>(data.num_features),
                  static_cast<long long>(cfg.min_length), static_cast<long long>(cfg.max_length), task_name(data.task));
  });
  return kExitOk;
}

int run_convert(const Context& ctx, const RunConfig& cfg) {
  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    const RaggedData data = read_ts_file(cfg.input);
    write_dataset(cfg.output, data);
    if (!cfg.quiet)
      std::printf("wrote %s: %lld sequences, F=%lld, %lld classes\n", cfg.output.c_str(),
                  static_cast<long long>(data.num_sequences()), static_cast<long long>(data.num_features),
                  static_cast<long long>(data.num_outputs));
  });
  return kExitOk;
}

int run_inspect(const Context& ctx, const RunConfig& cfg) {
  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    const DatasetReport report = inspect_dataset(cfg.data);
    print_report(report, std::cout);
    std::cout << "valid: yes\n";
    std::cout.flush();
  });
  return kExitOk;
}

}  // namespace ragtrain
