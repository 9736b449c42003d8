// The rows of DIR/trials.csv and of each training run's own result file (DIR/runs/tNNNN-rR.csv): what a
// resumed tune reads back to skip the runs that finished.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ragtrain/tune/halving.hpp"
#include "ragtrain/tune/search_space.hpp"

namespace ragtrain {

// trial,rung,trained_epochs,epochs_reached,val_loss,val_accuracy,seconds,status,seed, then one column per dimension.
std::string trials_csv_header(const SearchSpace& space);
std::string trials_csv_row(const RungResult& r, uint64_t seed, const Recipe& recipe);

// Reads the first nine fields of a row written by trials_csv_row. False on anything else (a torn or foreign
// line), so a damaged result file makes that run train again instead of feeding the search a wrong figure.
bool parse_trials_csv_row(const std::string& line, RungResult& r);

// "runs/t0007-r1": a training run's folder under DIR; its result file is that path + ".csv".
std::string run_name(int64_t trial, int rung);

}  // namespace ragtrain
