// PNG plots of a run's records with gnuplot: the data go to .tsv tables and every figure gets its own .gp
// script beside its PNG, so a figure can be restyled and redrawn with `gnuplot NAME.gp` without ragtrain.
#pragma once

#include <string>
#include <vector>

namespace ragtrain {

struct PlotOutputs {
  std::vector<std::string> images;   // PNG paths, in the order drawn
  std::string scaling_table;         // the table of a bench folder (empty for a train run)
};

// `dir` is a train --out folder (metrics.jsonl, and summary.json once the run finished) or a folder of bench
// --out JSON files, or both. Writes into `out_dir`:
//  - train: loss.png (train loss every log interval and per epoch, validation loss per epoch), accuracy.png
//    (train/validation accuracy per epoch; validation MAE for regression), throughput.png (sequences/s over
//    the run's elapsed time, resumes marked), ranks.png (per-rank compute, communication wait and I/O seconds);
//  - bench: scaling.tsv/.txt and scaling.png (efficiency and throughput against ranks).
// Throws UserError when `dir` holds nothing to plot, a record is malformed (naming the file and line), or
// gnuplot is missing or fails (the tables are written first).
PlotOutputs plot_folder(const std::string& dir, const std::string& out_dir);

// Every file name plot_folder may write into `out_dir` (for the check that it replaces nothing unasked).
const std::vector<std::string>& plot_file_names();

}  // namespace ragtrain
