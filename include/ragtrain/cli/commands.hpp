// The subcommands of the ragtrain binary. Each runs on every rank with its own typed configuration (built from
// the parsed options by cli/options.hpp) and returns the exit code.
#pragma once

#include "ragtrain/cli/options.hpp"
#include "ragtrain/comm/context.hpp"

namespace ragtrain {

int run_gen(const Context& ctx, const GenConfig& cfg);
int run_convert(const Context& ctx, const ConvertConfig& cfg);
int run_inspect(const Context& ctx, const InspectConfig& cfg);
int run_train(const Context& ctx, const TrainConfig& cfg);
int run_tune(const Context& ctx, const TuneConfig& cfg);
int run_eval(const Context& ctx, const EvalConfig& cfg);
int run_predict(const Context& ctx, const EvalConfig& cfg);
int run_bench(const Context& ctx, const BenchConfig& cfg);
int run_simulate(const Context& ctx, const SimulateConfig& cfg);
int run_plot(const Context& ctx, const PlotConfig& cfg);
int run_compare(const Context& ctx, const CompareConfig& cfg);

}  // namespace ragtrain
