// The cuDNN floor of one training step at batch one: forward (training mode) + backward data + backward weights of
// the LSTM for each sequence, nothing else (no head, loss, all-reduce or optimizer), with plain launches and
// replayed from one CUDA graph per sequence, for every algorithm cuDNN accepts. Same data as `ragtrain bench`
// (make_synthetic with the same spec). Prints a '#' table and writes JSON.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "../src/backend/cuda/cudnn_lstm.hpp"
#include "../src/backend/cuda/device_kernels.hpp"
#include "ragtrain/core/error_cuda.hpp"
#include "ragtrain/data/dataset.hpp"

using namespace ragtrain;
namespace po = boost::program_options;

namespace {

struct Result {
  std::string algo;
  bool usable = false;
  std::string why;
  double plain_us = 0, graph_us = 0;   // per sequence
  int64_t sequences = 0;               // how many were timed
};

// Microseconds per sequence of `passes` passes of `one_pass` (after one untimed pass).
template <class F>
double time_passes(cudaStream_t s, int passes, int64_t sequences, F&& one_pass) {
  one_pass();
  CUDA_CHECK(cudaStreamSynchronize(s));
  Event a = Event::create(true), b = Event::create(true);
  CUDA_CHECK(cudaEventRecord(a.get(), s));
  for (int p = 0; p < passes; ++p) one_pass();
  CUDA_CHECK(cudaEventRecord(b.get(), s));
  CUDA_CHECK(cudaEventSynchronize(b.get()));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a.get(), b.get()));
  return 1e3 * ms / static_cast<double>(passes * sequences);
}

// `n` first sequences of `data`.
Result measure(cudnnHandle_t h, cudaStream_t s, cudnnRNNAlgo_t algo, const SyntheticSpec& spec, int64_t hidden,
               int64_t layers, const RaggedData& data, int64_t n, const DeviceBuffer<float>& x, int passes) {
  Result r;
  r.algo = rnn_algo_name(algo);
  r.sequences = n;
  try {
    CudnnLstm lstm(h, s, spec.features, hidden, layers, algo);
    for (int64_t i = 0; i < n; ++i) lstm.prepare(data.offsets[i + 1] - data.offsets[i]);
    DeviceBuffer<float> w(static_cast<size_t>(lstm.weight_floats())), dw(static_cast<size_t>(lstm.weight_floats()));
    const float bound = 1.0f / std::sqrt(static_cast<float>(hidden));
    launch_fill_uniform(w.get(), lstm.weight_floats(), 1, -bound, bound, s);
    launch_fill_uniform(lstm.d_h_last(), hidden, 2, -0.1f, 0.1f, s);
    dw.zero_async(s);
    auto seq = [&](int64_t i) {
      const int64_t T = data.offsets[i + 1] - data.offsets[i];
      const float* xi = x.get() + data.offsets[i] * spec.features;
      lstm.forward(T, xi, w.get());
      lstm.backward(T, xi, w.get(), dw.get());
    };
    r.plain_us = time_passes(s, passes, n, [&] {
      for (int64_t i = 0; i < n; ++i) seq(i);
    });
    // One graph per sequence: each replay reads its own sequence in place, as a fixed-address graph must.
    std::vector<GraphExec> graphs;
    for (int64_t i = 0; i < n; ++i) {
      CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      seq(i);
      cudaGraph_t g = nullptr;
      CUDA_CHECK(cudaStreamEndCapture(s, &g));
      Graph owner(g);
      cudaGraphExec_t e = nullptr;
      CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
      graphs.emplace_back(e);
    }
    r.graph_us = time_passes(s, passes, n, [&] {
      for (const GraphExec& g : graphs) CUDA_CHECK(cudaGraphLaunch(g.get(), s));
    });
    r.usable = true;
  } catch (const std::exception& e) {
    cudaStreamSynchronize(s);
    cudaGetLastError();
    r.why = e.what();
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  SyntheticSpec spec;
  int64_t hidden = 50, layers = 1, passes = 1, standard_sequences = 200;
  std::string algo = "all", out;
  po::options_description opts("cudnn_floor: the cuDNN forward+backward floor per sequence (batch one)");
  opts.add_options()("help,h", "show this help")
      ("sequences", po::value(&spec.sequences)->default_value(2000), "sequences (one graph each; as ragtrain bench)")
      ("features", po::value(&spec.features)->default_value(36), "F")
      ("min-length", po::value(&spec.min_length)->default_value(60), "shortest sequence")
      ("max-length", po::value(&spec.max_length)->default_value(130), "longest sequence")
      ("seed", po::value(&spec.seed)->default_value(1), "data seed (as ragtrain gen/bench --seed)")
      ("hidden", po::value(&hidden)->default_value(50), "H")
      ("layers", po::value(&layers)->default_value(1), "L")
      ("passes", po::value(&passes)->default_value(1), "timed passes over the sequences (after one untimed)")
      ("standard-sequences", po::value(&standard_sequences)->default_value(200),
       "sequences timed for the (much slower, thousands of graph nodes each) standard algorithm")
      ("algo", po::value(&algo)->default_value("all"), "all, or one cuDNN RNN algorithm name")
      ("out", po::value(&out), "JSON file to write");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "cudnn_floor: " << e.what() << "\n" << opts;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << opts;
    return 0;
  }
  try {
    spec.classes = 10;
    const RaggedData data = make_synthetic(spec);
    double mean_t = 0;
    for (int64_t i = 0; i < data.num_sequences(); ++i) mean_t += data.offsets[i + 1] - data.offsets[i];
    mean_t /= static_cast<double>(data.num_sequences());

    CUDA_CHECK(cudaSetDevice(0));
    Stream stream = Stream::create();
    CudnnHandle handle = CudnnHandle::create(stream.get());
    DeviceBuffer<float> x(data.features.size());
    CUDA_CHECK(cudaMemcpy(x.get(), data.features.data(), x.bytes(), cudaMemcpyHostToDevice));

    std::vector<cudnnRNNAlgo_t> algos;
    if (algo == "all")
      algos = {CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H, CUDNN_RNN_ALGO_PERSIST_STATIC, CUDNN_RNN_ALGO_PERSIST_DYNAMIC,
               CUDNN_RNN_ALGO_STANDARD};
    else if (auto a = parse_rnn_algo(algo))
      algos = {*a};
    else
      throw UserError("--algo " + algo + " is not a cuDNN RNN algorithm", "use all, standard, persist_static, ...");

    std::vector<Result> results;
    for (cudnnRNNAlgo_t a : algos) {
      const int64_t n = a == CUDNN_RNN_ALGO_STANDARD ? std::min(standard_sequences, data.num_sequences())
                                                      : data.num_sequences();
      results.push_back(measure(handle.get(), stream.get(), a, spec, hidden, layers, data, n, x,
                                static_cast<int>(passes)));
    }

    std::printf("# cuDNN %zu floor: F=%lld H=%lld L=%lld, %lld sequences of lengths %lld..%lld (mean %.1f), "
                "forward(training)+backward data+backward weights per sequence\n",
                cudnnGetVersion(), static_cast<long long>(spec.features), static_cast<long long>(hidden),
                static_cast<long long>(layers), static_cast<long long>(spec.sequences),
                static_cast<long long>(spec.min_length), static_cast<long long>(spec.max_length), mean_t);
    std::printf("# %-24s %10s %12s %12s %14s\n", "algorithm", "sequences", "plain", "graph", "graph seq/s");
    std::printf("# %-24s %10s %12s %12s %14s\n", "", "", "(us/seq)", "(us/seq)", "(1/s)");
    double best = 0;
    std::string best_algo;
    std::string json = "{\"benchmark\": \"cudnn_floor\", \"cudnn_version\": " + std::to_string(cudnnGetVersion()) +
                       ", \"features\": " + std::to_string(spec.features) + ", \"hidden\": " + std::to_string(hidden) +
                       ", \"layers\": " + std::to_string(layers) + ", \"sequences\": " +
                       std::to_string(spec.sequences) + ", \"mean_length\": " + std::to_string(mean_t) +
                       ", \"algorithms\": {";
    bool first = true;
    for (const Result& r : results) {
      if (r.usable) {
        std::printf("  %-24s %10lld %12.1f %12.1f %14.1f\n", r.algo.c_str(), static_cast<long long>(r.sequences),
                    r.plain_us, r.graph_us, 1e6 / r.graph_us);
        // The floor is taken over the whole set only (the standard algorithm may be timed on a prefix).
        if (r.sequences == data.num_sequences() && (best == 0 || r.graph_us < best))
          best = r.graph_us, best_algo = r.algo;
      } else {
        std::printf("  %-24s %10s %12s %12s %14s\n", r.algo.c_str(), "-", "unsupported", "-", "-");
      }
      json += std::string(first ? "" : ", ") + "\"" + r.algo + "\": " +
              (r.usable ? "{\"plain_us\": " + std::to_string(r.plain_us) + ", \"graph_us\": " +
                              std::to_string(r.graph_us) + ", \"sequences\": " + std::to_string(r.sequences) + "}"
                        : std::string("null"));
      first = false;
    }
    json += "}, \"best_algorithm\": \"" + best_algo + "\", \"floor_us\": " + std::to_string(best) + "}\n";
    if (!out.empty()) std::ofstream(out) << json;
    return best > 0 ? 0 : 3;
  } catch (const UserError& e) {
    std::cerr << "cudnn_floor: error: " << e.what() << "\n  hint: " << e.hint() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cudnn_floor: error: " << e.what() << "\n";
    return 3;
  }
}
