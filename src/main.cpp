// ragtrain: one binary, one subcommand per job; every rank parses, runs and exits with the same code.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "ragtrain/cli/commands.hpp"
#include "ragtrain/cli/options.hpp"
#include "ragtrain/cli/output_guard.hpp"
#include "ragtrain/cli/quick_answer.hpp"
#include "ragtrain/cli/version.hpp"
#include "ragtrain/comm/context.hpp"
#include "ragtrain/comm/signals.hpp"
#include "ragtrain/core/error.hpp"

int main(int argc, char** argv) {
  using namespace ragtrain;
  // Help, --version and --print-config need no other rank: answered before MPI_Init, which takes most of a second.
  if (const std::optional<int> answered = answer_without_mpi(argc, argv)) return *answered;
  // Only `train` turns SIGTERM/SIGUSR1/SIGINT into "checkpoint and stop"; every other command keeps their default
  // (terminate). Installed before MPI_Init, so that the MPI library starts up with them in place.
  if (argc > 1 && std::string(argv[1]) == "train") install_stop_handlers();
  MpiEnvironment mpi(&argc, &argv);
  Context ctx;
  try {
    ctx = Context::create(MPI_COMM_WORLD);
    Invocation inv;
    const bool version = argc > 1 && std::string(argv[1]) == "--version";
    collective_phase(ctx, [&] {
      if (version)
        USER_CHECK(argc == 2, "--version takes no other arguments", "run `ragtrain --version` alone");
      else
        inv = parse_command_line(argc, argv);
    });
    // One job, one configuration: ranks started with different options (an MPMD launch, a per-rank config file)
    // would otherwise fail later inside a collective with a misleading message, or train different models.
    if (!version)
      collective_phase(ctx, [&] {
        USER_CHECK(same_on_every_rank(ctx, inv.config.command + "\n" + inv.config.provenance.effective),
                   "the ranks of this job were started with different options",
                   "start every rank with the same command line and config file (mpirun -np N ragtrain ..., srun "
                   "ragtrain ...); `ragtrain ... --print-config` shows what each one reads");
      });
    if (version) {
      if (ctx.is_root()) std::cout << version_text();
      return kExitOk;
    }
    if (inv.help) {   // answered above without MPI; here only if the arguments parse differently the second time
      if (ctx.is_root()) (inv.exit_code == kExitOk ? std::cout : std::cerr) << inv.help_text;
      return inv.exit_code;
    }
    if (inv.config.print_config) {   // validated like a run, so what it prints is a configuration that runs
      if (ctx.is_root()) std::cout << inv.config.provenance.effective;
      return kExitOk;
    }
    // No output may destroy data: inputs, data sets, checkpoints, other runs' folders (cli/output_guard.hpp).
    collective_phase(ctx, [&] { if (ctx.is_root()) check_outputs(inv.config); });
    const std::string& cmd = inv.config.command;
    if (cmd == "gen") return run_gen(ctx, gen_config(inv.config));
    if (cmd == "convert") return run_convert(ctx, convert_config(inv.config));
    if (cmd == "inspect") return run_inspect(ctx, inspect_config(inv.config));
    if (cmd == "train") return run_train(ctx, train_config(inv.config));
    if (cmd == "tune") return run_tune(ctx, tune_config(inv.config));
    if (cmd == "eval") return run_eval(ctx, eval_config(inv.config));
    if (cmd == "predict") return run_predict(ctx, eval_config(inv.config));
    if (cmd == "bench") return run_bench(ctx, bench_config(inv.config));
    if (cmd == "simulate") return run_simulate(ctx, simulate_config(inv.config));
    if (cmd == "plot") return run_plot(ctx, plot_config(inv.config));
    if (cmd == "compare") return run_compare(ctx, compare_config(inv.config));
    return kExitInternal;
  } catch (const RunAborted& a) {
    return a.code;   // every rank got here together; MpiEnvironment finalizes
  } catch (...) {
    // An error outside a collective phase: other ranks may be inside a collective, so only an abort is safe.
    print_error(&ctx, std::current_exception());
    MPI_Abort(MPI_COMM_WORLD, kExitInternal);
    return kExitInternal;
  }
}
