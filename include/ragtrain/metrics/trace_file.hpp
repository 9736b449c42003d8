// The timeline of every rank merged into one Chrome trace-event file (chrome://tracing, ui.perfetto.dev), as
// Horovod's timeline: one process track per rank (pid = rank, named "rank R (host)"), one complete event
// ("ph": "X") per phase with its step in "args".
#pragma once

#include <string>

#include "ragtrain/comm/context.hpp"
#include "ragtrain/metrics/metrics.hpp"
#include "ragtrain/metrics/trace.hpp"

namespace ragtrain {

// Collective: every rank's events are gathered to rank 0, which writes `path` atomically (temporary file, fsync,
// rename) as {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": `about` + per-rank truncation}.
// Throws UserError on rank 0 when the file cannot be written (call it inside a collective phase).
void write_chrome_trace(const Context& ctx, const Timeline& timeline, const std::string& path, const Json& about);

}  // namespace ragtrain
