// Class labels given as text (CSV files, NumPy string arrays) mapped to the ids 0..C-1 that format v1 stores.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ragtrain {

struct ClassLabels {
  std::vector<int32_t> ids;          // (N) class id of every sequence
  std::vector<std::string> names;    // (C) class_names: names[id] is the original label
};

// Maps one label per sequence to class ids. With `fixed_names` (the class names of another converted file,
// e.g. the training set), ids are positions in that list, so that a test set converted on its own numbers
// the classes the same way; a label not in it is an error. Otherwise the classes are the distinct labels,
// sorted numerically when every label is a number ("2" before "10") and byte-wise otherwise, which does
// not depend on the order of the rows. Needs at least two classes. `where(i)` names sequence i in messages
// (file and line, or array and index); `fixed_source` names where fixed_names came from.
ClassLabels map_class_labels(const std::vector<std::string>& labels, const std::vector<std::string>& fixed_names,
                             const std::string& fixed_source, const std::function<std::string(int64_t)>& where);

// Class ids mean the same classes in both: a UserError when `names` (of `what`, e.g. "validation file 'v.h5'") and
// `reference_names` (of `reference`, e.g. "the model in 'run/best.h5'") are both known and differ, since their
// ids would then be compared across different classes; the hint is convert --class-names-from. Unknown names
// (an empty list: data written without the attribute) are not compared.
void require_same_class_names(const std::vector<std::string>& names, const std::string& what,
                              const std::vector<std::string>& reference_names, const std::string& reference);

}  // namespace ragtrain
