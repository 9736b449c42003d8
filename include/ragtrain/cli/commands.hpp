// The subcommands of the ragtrain binary. Each runs on every rank and returns the exit code.
#pragma once

#include "ragtrain/cli/options.hpp"
#include "ragtrain/comm/context.hpp"

namespace ragtrain {

int run_gen(const Context& ctx, const RunConfig& cfg);
int run_convert(const Context& ctx, const RunConfig& cfg);
int run_inspect(const Context& ctx, const RunConfig& cfg);
int run_train(const Context& ctx, const RunConfig& cfg);
int run_eval(const Context& ctx, const RunConfig& cfg);
int run_predict(const Context& ctx, const RunConfig& cfg);
int run_bench(const Context& ctx, const RunConfig& cfg);
int run_simulate(const Context& ctx, const RunConfig& cfg);
int run_plot(const Context& ctx, const RunConfig& cfg);
int run_compare(const Context& ctx, const RunConfig& cfg);

}  // namespace ragtrain
