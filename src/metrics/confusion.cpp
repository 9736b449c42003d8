// ConfusionMatrix scores and their table and JSON forms.
#include "ragtrain/metrics/confusion.hpp"

#include <algorithm>
#include <cstdio>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

ConfusionMatrix::ConfusionMatrix(int64_t classes)
    : classes_(classes), counts_(static_cast<size_t>(classes * classes), 0) {
  RT_CHECK(classes >= 1, "a confusion matrix needs a class, got " << classes);
}

void ConfusionMatrix::add(int32_t truth, int32_t predicted, int64_t count) {
  RT_CHECK(truth >= 0 && truth < classes_ && predicted >= 0 && predicted < classes_,
           "class (" << truth << ", " << predicted << ") outside 0.." << classes_ - 1);
  counts_[static_cast<size_t>(truth * classes_ + predicted)] += count;
}

int64_t ConfusionMatrix::at(int32_t truth, int32_t predicted) const {
  return counts_[static_cast<size_t>(truth * classes_ + predicted)];
}

int64_t ConfusionMatrix::total() const {
  int64_t n = 0;
  for (int64_t v : counts_) n += v;
  return n;
}

int64_t ConfusionMatrix::correct() const {
  int64_t n = 0;
  for (int32_t c = 0; c < classes_; ++c) n += at(c, c);
  return n;
}

double ConfusionMatrix::accuracy() const {
  const int64_t n = total();
  return n > 0 ? static_cast<double>(correct()) / static_cast<double>(n) : 0.0;
}

ClassScores ConfusionMatrix::scores(int32_t c) const {
  ClassScores s;
  for (int32_t k = 0; k < classes_; ++k) {
    s.support += at(c, k);
    s.predicted += at(k, c);
  }
  const auto tp = static_cast<double>(at(c, c));
  s.precision = s.predicted > 0 ? tp / static_cast<double>(s.predicted) : 0.0;
  s.recall = s.support > 0 ? tp / static_cast<double>(s.support) : 0.0;
  s.f1 = s.precision + s.recall > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0.0;
  return s;
}

ClassScores ConfusionMatrix::macro_average() const {
  ClassScores avg;
  int64_t present = 0;
  for (int32_t c = 0; c < classes_; ++c) {
    const ClassScores s = scores(c);
    avg.support += s.support;
    avg.predicted += s.predicted;
    if (s.support == 0 && s.predicted == 0) continue;
    avg.precision += s.precision;
    avg.recall += s.recall;
    avg.f1 += s.f1;
    ++present;
  }
  if (present > 0) {
    avg.precision /= static_cast<double>(present);
    avg.recall /= static_cast<double>(present);
    avg.f1 /= static_cast<double>(present);
  }
  return avg;
}

ClassScores ConfusionMatrix::weighted_average() const {
  ClassScores avg;
  for (int32_t c = 0; c < classes_; ++c) {
    const ClassScores s = scores(c);
    const auto w = static_cast<double>(s.support);
    avg.precision += w * s.precision;
    avg.recall += w * s.recall;
    avg.f1 += w * s.f1;
    avg.support += s.support;
    avg.predicted += s.predicted;
  }
  if (avg.support > 0) {
    avg.precision /= static_cast<double>(avg.support);
    avg.recall /= static_cast<double>(avg.support);
    avg.f1 /= static_cast<double>(avg.support);
  }
  return avg;
}

std::vector<std::string> class_labels_or_ids(const std::vector<std::string>& names, int64_t classes) {
  if (static_cast<int64_t>(names.size()) == classes) return names;
  std::vector<std::string> ids;
  for (int64_t c = 0; c < classes; ++c) ids.push_back(std::to_string(c));
  return ids;
}

std::string format_classification_report(const ConfusionMatrix& m, const std::vector<std::string>& names,
                                         int64_t max_matrix) {
  const std::vector<std::string> label = class_labels_or_ids(names, m.classes());
  size_t w = 12;   // wide enough for "weighted avg"
  for (const auto& s : label) w = std::max(w, s.size());
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-*s %9s %9s %9s %9s\n", static_cast<int>(w), "class", "precision", "recall", "f1",
                "support");
  out += buf;
  const auto row = [&](const std::string& name, const ClassScores& s) {
    std::snprintf(buf, sizeof buf, "%-*s %9.4f %9.4f %9.4f %9lld\n", static_cast<int>(w), name.c_str(), s.precision,
                  s.recall, s.f1, static_cast<long long>(s.support));
    out += buf;
  };
  for (int32_t c = 0; c < m.classes(); ++c) row(label[static_cast<size_t>(c)], m.scores(c));
  out += std::string(w + 40, '-') + "\n";
  row("macro avg", m.macro_average());
  row("weighted avg", m.weighted_average());

  if (m.classes() > max_matrix) {
    out += "\nconfusion matrix: " + std::to_string(m.classes()) + " classes, too wide to print; see eval --out\n";
    return out;
  }
  // Columns as wide as the longest class name or count, so that the matrix lines up.
  size_t cw = 5;
  for (const auto& s : label) cw = std::max(cw, s.size());
  for (int64_t v : m.counts()) cw = std::max(cw, std::to_string(v).size());
  out += "\nconfusion matrix (rows: true class, columns: predicted class)\n";
  out += std::string(w, ' ');
  for (const auto& s : label) out += " " + std::string(cw - s.size(), ' ') + s;
  out += "\n";
  for (int32_t t = 0; t < m.classes(); ++t) {
    const std::string& name = label[static_cast<size_t>(t)];
    out += name + std::string(w - name.size(), ' ');
    for (int32_t p = 0; p < m.classes(); ++p) {
      const std::string v = std::to_string(m.at(t, p));
      out += " " + std::string(cw - v.size(), ' ') + v;
    }
    out += "\n";
  }
  return out;
}

nlohmann::ordered_json classification_json(const ConfusionMatrix& m, const std::vector<std::string>& names) {
  using J = nlohmann::ordered_json;
  const std::vector<std::string> label = class_labels_or_ids(names, m.classes());
  const auto scores = [](const ClassScores& s) {
    return J{{"precision", s.precision}, {"recall", s.recall}, {"f1", s.f1}, {"support", s.support},
             {"predicted", s.predicted}};
  };
  J per_class = J::array();
  for (int32_t c = 0; c < m.classes(); ++c) {
    J s{{"class", label[static_cast<size_t>(c)]}};
    s.update(scores(m.scores(c)));
    per_class.push_back(std::move(s));
  }
  J matrix = J::array();
  for (int32_t t = 0; t < m.classes(); ++t) {
    J r = J::array();
    for (int32_t p = 0; p < m.classes(); ++p) r.push_back(m.at(t, p));
    matrix.push_back(std::move(r));
  }
  return J{{"accuracy", m.accuracy()},
           {"correct", m.correct()},
           {"classes", label},
           {"per_class", per_class},
           {"macro_avg", scores(m.macro_average())},
           {"weighted_avg", scores(m.weighted_average())},
           {"confusion_matrix", matrix}};
}

}  // namespace ragtrain
