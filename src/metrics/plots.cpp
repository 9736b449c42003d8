// Run records -> .tsv tables -> gnuplot scripts -> PNG images.
#include "ragtrain/metrics/plots.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/output_file.hpp"
#include "ragtrain/metrics/metrics.hpp"
#include "ragtrain/metrics/scaling.hpp"

namespace fs = std::filesystem;

namespace ragtrain {

namespace {

// Shared look of every figure: one terminal, one font, grid, key outside the data where possible.
constexpr const char* kPreamble =
    "set terminal pngcairo size 960,560 font 'sans,11' noenhanced\n"
    "set grid lc rgb '#dddddd'\n"
    "set border lc rgb '#555555'\n"
    "set key box opaque samplen 2\n"
    "set datafile missing 'NaN'\n"
    "set datafile separator '\\t'\n";

std::string num(double v) {
  if (!std::isfinite(v)) return "NaN";
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

double field(const Json& rec, const char* name) {
  return rec.contains(name) && rec[name].is_number() ? rec[name].get<double>() : std::nan("");
}

// Atomically (core/output_file.hpp): a kill or a full disk leaves the previous table or script, or none.
void write_text(const fs::path& path, const std::string& text) { write_text_atomic(path.string(), text); }

// Runs gnuplot on `script` inside `dir` (the scripts name their files relative to it); UserError with gnuplot's
// own message when it fails.
void run_gnuplot(const fs::path& dir, const std::string& script_name) {
  const fs::path script = dir / script_name;
  const std::string cmd = "cd '" + dir.string() + "' && gnuplot '" + script_name + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  USER_CHECK(p != nullptr, "cannot start gnuplot", "install gnuplot (Debian: apt-get install gnuplot-nox)");
  std::string output;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  const int status = pclose(p);
  USER_CHECK(status == 0, "gnuplot failed on '" << script.string() << "': " << output,
             "the script and its .tsv data are kept beside it; run `gnuplot " << script_name << "` in "
                                                                                 << dir.string() << " to see more");
}

bool have_gnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

std::vector<Json> read_records(const fs::path& path) {
  std::ifstream in(path);
  std::vector<Json> out;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    Json rec = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    USER_CHECK(rec.is_object(), "'" << path.string() << "' line " << n << " is not a JSON object",
               "metrics.jsonl is written by ragtrain train; a torn last line from a killed run can be deleted");
    out.push_back(std::move(rec));
  }
  return out;
}

struct Figure {
  std::string name;     // file stem
  std::string script;   // gnuplot commands after the preamble and `set output`
};

// The four figures of a train run. Tables first, so they exist even when gnuplot is missing.
std::vector<Figure> train_figures(const fs::path& dir, const fs::path& out) {
  const std::vector<Json> recs = read_records(dir / "metrics.jsonl");
  USER_CHECK(!recs.empty(), "'" << (dir / "metrics.jsonl").string() << "' holds no records",
             "plot a run that took at least one logged step");

  // Steps per epoch from an epoch record (its step over its epoch), so the x axis can be in epochs.
  double steps_per_epoch = 0;
  for (const Json& r : recs)
    if (r.value("event", "") == "epoch" && r.value("epoch", 0) > 0) {
      steps_per_epoch = static_cast<double>(r["step"].get<int64_t>()) / r["epoch"].get<double>();
      break;
    }
  const bool epochs_x = steps_per_epoch > 0;
  auto x_of = [&](const Json& r) { return epochs_x ? r["step"].get<double>() / steps_per_epoch : r["step"].get<double>(); };

  std::ostringstream steps, epochs, resumes;
  steps << "# x\tloss\telapsed_s\tsequences_per_second\tstep\twindow_sequences_per_second\n";
  // Throughput over the last kWindow log intervals (their sequences over their seconds): one interval of a few
  // milliseconds is noisy, the window shows the trend.
  constexpr size_t kWindow = 10;
  std::vector<std::pair<double, double>> window;   // (sequences, seconds) of the latest intervals
  epochs << "# epoch\ttrain_loss\tval_loss\ttrain_accuracy\tval_accuracy\tval_mae\n";
  double elapsed = 0;
  bool any_val_acc = false, any_val_mae = false, any_val = false, any_train_acc = false;
  for (const Json& r : recs) {
    const std::string ev = r.value("event", "");
    if (ev == "step") {
      elapsed += field(r, "seconds");
      window.emplace_back(field(r, "sequences"), field(r, "seconds"));
      if (window.size() > kWindow) window.erase(window.begin());
      double seqs = 0, secs = 0;
      for (const auto& [q, t] : window) {
        seqs += q;
        secs += t;
      }
      steps << num(x_of(r)) << '\t' << num(field(r, "loss")) << '\t' << num(elapsed) << '\t'
            << num(field(r, "sequences_per_second")) << '\t' << r["step"].get<int64_t>() << '\t'
            << num(secs > 0 ? seqs / secs : std::nan("")) << '\n';
    } else if (ev == "epoch") {
      epochs << r["epoch"].get<int64_t>() << '\t' << num(field(r, "train_loss")) << '\t' << num(field(r, "val_loss"))
             << '\t' << num(field(r, "train_accuracy")) << '\t' << num(field(r, "val_accuracy")) << '\t'
             << num(field(r, "val_mae")) << '\n';
      any_val = any_val || r.contains("val_loss");
      any_val_acc = any_val_acc || r.contains("val_accuracy");
      any_val_mae = any_val_mae || r.contains("val_mae");
      any_train_acc = any_train_acc || r.contains("train_accuracy");
    } else if (ev == "resume") {
      resumes << num(elapsed) << '\t' << r["step"].get<int64_t>() << '\n';
    }
  }
  write_text(out / "steps.tsv", steps.str());
  write_text(out / "epochs.tsv", epochs.str());
  const std::string title = fs::path(dir).filename().string().empty() ? dir.string() : fs::path(dir).filename().string();
  // Scripts name their data relative to their own folder (gnuplot runs there), so the folder can move.
  auto path_of = [](const char* name) { return "'" + std::string(name) + "'"; };

  std::vector<Figure> figs;
  {
    std::ostringstream g;
    g << "set title 'loss: " << title << "'\n"
      << "set xlabel '" << (epochs_x ? "epoch" : "step") << "'\nset ylabel 'loss'\nset key top right\n"
      << "plot " << path_of("steps.tsv") << " using 1:2 with lines lw 1 lc rgb '#9ecae1' title 'train (log interval)', \\\n"
      << "     " << path_of("epochs.tsv") << " using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb '#08519c' title 'train (epoch)'";
    if (any_val)
      g << ", \\\n     " << path_of("epochs.tsv") << " using 1:3 with linespoints pt 5 ps 0.8 lw 2 lc rgb '#d94801' title 'validation (epoch)'";
    g << "\n";
    figs.push_back({"loss", g.str()});
  }
  if (any_train_acc || any_val_acc || any_val_mae) {
    std::ostringstream g;
    g << "set title '" << (any_val_mae ? "validation MAE: " : "accuracy: ") << title << "'\nset xlabel 'epoch'\n";
    if (any_val_mae) {
      g << "set ylabel 'mean absolute error'\nplot " << path_of("epochs.tsv")
        << " using 1:6 with linespoints pt 5 lw 2 lc rgb '#d94801' title 'validation MAE'\n";
    } else {
      g << "set ylabel 'accuracy'\nset yrange [0:1.02]\nset key bottom right\nplot " << path_of("epochs.tsv")
        << " using 1:4 with linespoints pt 7 lw 2 lc rgb '#08519c' title 'train'";
      if (any_val_acc)
        g << ", \\\n     " << path_of("epochs.tsv") << " using 1:5 with linespoints pt 5 lw 2 lc rgb '#d94801' title 'validation'";
      g << "\n";
    }
    figs.push_back({"accuracy", g.str()});
  }
  {
    std::ostringstream g;
    g << "set title 'throughput: " << title << "'\nset xlabel 'elapsed training time (s, summed over log intervals)'\n"
      << "set ylabel 'sequences / s (all ranks)'\nset yrange [0:*]\nset key tmargin right horizontal\n";
    // Resumes as dashed vertical lines: time spent before a restart is not counted.
    std::istringstream rs(resumes.str());
    std::string line;
    int k = 0;
    while (std::getline(rs, line)) {
      const std::string x = line.substr(0, line.find('\t'));
      ++k;
      g << "set arrow " << k << " from " << x << ", graph 0 to " << x << ", graph 1 nohead dt 2 lc rgb '#d94801'\n"
        << "set label " << k << " 'resume' at " << x << ", graph 0.95 offset 0.5,0 tc rgb '#d94801'\n";
    }
    g << "plot " << path_of("steps.tsv") << " using 3:4 with points pt 7 ps 0.5 lc rgb '#a1d99b' title 'per log interval', \\\n"
      << "     " << path_of("steps.tsv") << " using 3:6 with lines lw 2.5 lc rgb '#006d2c' title 'last " << kWindow
      << " intervals'\n";
    figs.push_back({"throughput", g.str()});
  }
  const fs::path summary_path = dir / "summary.json";
  if (fs::exists(summary_path)) {
    std::ifstream in(summary_path);
    const Json s = Json::parse(in, nullptr, /*allow_exceptions=*/false);
    USER_CHECK(s.is_object(), "'" << summary_path.string() << "' is not valid JSON", "summary.json is written by ragtrain train");
    if (s.contains("per_rank") && s["per_rank"].is_array() && !s["per_rank"].empty()) {
      std::ostringstream t;
      t << "# rank\tcompute_s\tcomm_s\tio_s\thost\n";
      for (const Json& r : s["per_rank"])
        t << r.value("rank", 0) << '\t' << num(field(r, "compute_s")) << '\t' << num(field(r, "comm_s")) << '\t'
          << num(field(r, "io_s")) << '\t' << r.value("host", "") << '\n';
      write_text(out / "ranks.tsv", t.str());
      std::ostringstream g;
      g << "set title 'time per rank: " << title << "'\nset xlabel 'rank'\nset ylabel 'seconds'\nset yrange [0:*]\n"
        << "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.85 border -1\n"
        << "set boxwidth 0.7\nset key top right\n"
        << "plot " << path_of("ranks.tsv") << " using 2:xtic(1) lc rgb '#08519c' title 'compute', \\\n"
        << "     '' using 3 lc rgb '#fd8d3c' title 'communication wait', \\\n"
        << "     '' using 4 lc rgb '#969696' title 'I/O'\n";
      figs.push_back({"ranks", g.str()});
    }
  }
  return figs;
}

// Bench records of the folder: *.json files whose top level has "benchmark".
std::vector<std::pair<std::string, Json>> bench_records(const fs::path& dir) {
  std::vector<std::pair<std::string, Json>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    Json j = Json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("benchmark")) out.emplace_back(e.path().string(), std::move(j));
  }
  return out;
}

Figure scaling_figure(const std::vector<ScalingRow>& rows, const fs::path& out) {
  std::ostringstream t;
  t << "# ranks\tsequences_per_second\tspeedup\tefficiency\n";
  for (const ScalingRow& r : rows)
    t << r.ranks << '\t' << num(r.sequences_per_second) << '\t' << num(r.speedup) << '\t' << num(r.efficiency) << '\n';
  write_text(out / "scaling.tsv", t.str());
  const std::string data = "'scaling.tsv'";
  std::ostringstream g;
  g << "set title 'scaling (weak: every rank trains batch-per-rank sequences per step)'\n"
    << "set xlabel 'ranks'\nset logscale x 2\n"
    << "set xrange [" << num(static_cast<double>(rows.front().ranks) / 1.4) << ":"
    << num(static_cast<double>(rows.back().ranks) * 1.4) << "]\nset xtics (";
  for (size_t i = 0; i < rows.size(); ++i) g << (i ? ", " : "") << rows[i].ranks;
  g << ")\nset ylabel 'parallel efficiency'\nset yrange [0:1.15]\nset y2label 'sequences / s (all ranks)'\n"
    << "set y2range [0:*]\nset y2tics\nset ytics nomirror\nset key bottom left\n"
    << "plot 1 with lines dt 2 lc rgb '#999999' title 'ideal', \\\n"
    << "     " << data << " using 1:4 with linespoints pt 7 lw 2 lc rgb '#08519c' title 'efficiency', \\\n"
    << "     " << data << " using 1:2 axes x1y2 with linespoints pt 5 lw 2 lc rgb '#238b45' title 'sequences/s'\n";
  return {"scaling", g.str()};
}

}  // namespace

const std::vector<std::string>& plot_file_names() {
  static const std::vector<std::string> names = {
      "steps.tsv",  "epochs.tsv",   "ranks.tsv",       "scaling.tsv",    "scaling.txt", "loss.png",
      "loss.gp",    "accuracy.png", "accuracy.gp",     "throughput.png", "throughput.gp",
      "ranks.png",  "ranks.gp",     "scaling.png",     "scaling.gp"};
  return names;
}

PlotOutputs plot_folder(const std::string& dir_name, const std::string& out_name) {
  const fs::path dir(dir_name), out(out_name);
  std::error_code ec;
  USER_CHECK(fs::is_directory(dir, ec), "'" << dir_name << "' is not a folder",
             "pass a train --out folder or a folder of bench JSON files");
  const bool train = fs::exists(dir / "metrics.jsonl", ec);
  const auto benches = bench_records(dir);
  USER_CHECK(train || !benches.empty(), "'" << dir_name << "' holds no metrics.jsonl and no bench JSON files",
             "pass a train --out folder or a folder of `ragtrain bench --out` files");
  fs::create_directories(out, ec);
  USER_CHECK(!ec && fs::is_directory(out), "cannot create the plot folder '" << out_name << "'",
             "choose a writable --out folder");

  PlotOutputs result;
  std::vector<Figure> figs;
  if (train) figs = train_figures(dir, out);
  if (!benches.empty()) {
    const std::vector<ScalingRow> rows = scaling_rows(benches);
    result.scaling_table = format_scaling_table(rows);
    write_text(out / "scaling.txt", result.scaling_table);
    figs.push_back(scaling_figure(rows, out));
  }
  USER_CHECK(have_gnuplot(), "gnuplot is not installed; the tables are in '" << out_name << "'",
             "install gnuplot (Debian: apt-get install gnuplot-nox) and run ragtrain plot again");
  for (const Figure& f : figs) {
    // gnuplot draws into a temporary PNG (driven by a temporary script naming it), renamed when complete; the
    // script kept beside the PNG names the final file, for redrawing by hand.
    const fs::path png = out / (f.name + ".png"), gp = out / (f.name + ".gp");
    AtomicOutput image(png.string());
    const std::string tmp_png = fs::path(image.temp_path()).filename().string();
    AtomicOutput run_script((out / (f.name + ".draw.gp")).string());
    write_text(run_script.temp_path(), std::string(kPreamble) + "set output '" + tmp_png + "'\n" + f.script);
    run_gnuplot(out, fs::path(run_script.temp_path()).filename().string());
    image.commit();
    write_text(gp, std::string(kPreamble) + "set output '" + f.name + ".png'\n" + f.script);
    result.images.push_back(png.string());
  }
  return result;
}

}  // namespace ragtrain
