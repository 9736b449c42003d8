// MPI environment, rank layout and collective error agreement.
#include "ragtrain/comm/context.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>

#include "ragtrain/comm/watchdog.hpp"
#include "ragtrain/core/error.hpp"

namespace ragtrain {

namespace {

// Open MPI's OMPIO opens every file a second time for shared file pointers, by default through its sharedfp/sm
// component, whose lock is a POSIX semaphore named after the file's base name alone (/dev/shm/sem.OMPIO_<name>):
// one per node, shared by every job that opens a file of that name. A process killed inside that lock's critical
// section leaves it at zero, and from then on every MPI_File_open of any file of that name on that node waits
// forever (seen: one stuck `val.h5` semaphore hung every later run on the machine that read a val.h5). ragtrain
// uses no shared file pointers and opens files through MPI-IO only to read them; `individual` takes no lock and
// creates no file on such an open. A choice the user made (OMPI_MCA_sharedfp already set) is kept.
void avoid_node_wide_file_locks() { setenv("OMPI_MCA_sharedfp", "individual", /*overwrite=*/0); }

}  // namespace

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  avoid_node_wide_file_locks();
  // Reader threads (ShardLoad, ShardWindow) run beside the main thread but never call MPI: FUNNELED is the
  // level that allows it.
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiEnvironment::~MpiEnvironment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

Context Context::create(MPI_Comm world) {
  Context c;
  c.world = world;
  MPI_CHECK(MPI_Comm_rank(world, &c.rank));
  MPI_CHECK(MPI_Comm_size(world, &c.size));
  MPI_Comm local;
  MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, c.rank, MPI_INFO_NULL, &local));
  MPI_CHECK(MPI_Comm_rank(local, &c.local_rank));
  MPI_CHECK(MPI_Comm_size(local, &c.local_size));
  MPI_Comm_free(&local);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_CHECK(MPI_Get_processor_name(name, &len));
  c.host.assign(name, static_cast<size_t>(len));
  return c;
}

void print_error(const Context* ctx, const std::exception_ptr& e) {
  std::string prefix = "ragtrain: error: ";
  if (ctx && ctx->size > 1) prefix = "ragtrain: error (rank " + std::to_string(ctx->rank) + " on " + ctx->host + "): ";
  try {
    std::rethrow_exception(e);
  } catch (const UserError& u) {
    std::cerr << prefix << u.what() << "\n";
    if (!u.hint().empty()) std::cerr << "  hint: " << u.hint() << "\n";
  } catch (const InternalError& i) {
    std::cerr << prefix << "internal: " << i.what() << "\n"
              << "  hint: this is a bug or a library failure; please report it with the command line\n";
  } catch (const std::exception& x) {
    std::cerr << prefix << x.what() << "\n";
  } catch (...) {
    std::cerr << prefix << "unknown exception\n";
  }
  std::cerr.flush();
}

bool same_on_every_rank(const Context& ctx, const std::string& text) {
  // std::hash: the same binary on every rank gives the same value for the same text.
  const auto mine = static_cast<int64_t>(std::hash<std::string>{}(text) >> 1);
  int64_t low = 0, high = 0;
  MPI_Allreduce(&mine, &low, 1, MPI_INT64_T, MPI_MIN, ctx.world);
  MPI_Allreduce(&mine, &high, 1, MPI_INT64_T, MPI_MAX, ctx.world);
  return low == high;
}

void agree_on_errors(const Context& ctx, std::exception_ptr local) {
  int code = 0;
  if (local) {
    code = kExitInternal;
    try {
      std::rethrow_exception(local);
    } catch (const UserError&) {
      code = kExitUserError;
    } catch (const RunAborted& a) {
      code = a.code;
    } catch (...) {
    }
  }
  int worst = 0;
  int first = local ? ctx.rank : ctx.size;
  // Both reductions are plain collectives every rank reaches: the phase before them never blocks.
  watched_allreduce(ctx, &code, &worst, 1, MPI_INT, MPI_MAX, "the agreement that closes a phase (checkpoint, log)");
  if (worst == 0) return;
  int lowest = 0;
  watched_allreduce(ctx, &first, &lowest, 1, MPI_INT, MPI_MIN, "the agreement that closes a phase (checkpoint, log)");
  if (ctx.rank == lowest) {
    bool already_printed = false;
    try {
      std::rethrow_exception(local);
    } catch (const RunAborted&) {
      already_printed = true;
    } catch (...) {
    }
    if (!already_printed) print_error(&ctx, local);
  }
  throw RunAborted{worst};
}

}  // namespace ragtrain
