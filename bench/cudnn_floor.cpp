// The cuDNN floor of one training step: forward (training mode) + backward data + backward weights of the LSTM for
// each batch of K sequences, nothing else (no gather, head, loss, all-reduce or optimizer), with plain launches and
// replayed from one CUDA graph per batch, for every algorithm cuDNN accepts and both batch layouts (padded to the
// batch's longest length, or ragged: per-sequence lengths in the descriptor). Same data as `ragtrain bench`
// (make_synthetic with the same spec); for K > 1 the sequences are sorted by length and cut into batches of K,
// as the balanced schedule groups them. Prints a '#' table and writes JSON.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "../src/backend/cuda/cudnn_lstm.hpp"
#include "../src/backend/cuda/fill.hpp"
#include "ragtrain/core/error_cuda.hpp"
#include "ragtrain/data/synthetic.hpp"

using namespace ragtrain;
namespace po = boost::program_options;

namespace {

// One batch: its sequences' lengths and where its padded input starts in the pool.
struct HostBatch {
  int64_t B = 0, T = 0;
  std::vector<int32_t> lengths;   // (B) true lengths
  int64_t x_offset = 0;           // floats into the pool: x (T, B, F), time-major, zero past each length
  int64_t len_offset = 0;         // ints into the length pools
};

struct Timing {
  bool usable = false;
  std::string why;
  double plain_us = 0, graph_us = 0;   // per batch (one training step of K sequences per rank)
};

struct Result {
  std::string algo;
  int64_t batches = 0, sequences = 0;   // how many were timed
  Timing padded, ragged;
};

// Microseconds per batch of `passes` passes of `one_pass` over `batches` batches (after one untimed pass).
template <class F>
double time_passes(cudaStream_t s, int passes, int64_t batches, F&& one_pass) {
  one_pass();
  CUDA_CHECK(cudaStreamSynchronize(s));
  Event a = Event::create(true), b = Event::create(true);
  CUDA_CHECK(cudaEventRecord(a.get(), s));
  for (int p = 0; p < passes; ++p) one_pass();
  CUDA_CHECK(cudaEventRecord(b.get(), s));
  CUDA_CHECK(cudaEventSynchronize(b.get()));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a.get(), b.get()));
  return 1e3 * ms / static_cast<double>(passes * batches);
}

// The first `n` batches with one layout.
Timing measure(cudnnHandle_t h, cudaStream_t s, cudnnRNNAlgo_t algo, BatchLayout layout, const ModelShape& shape,
               const std::vector<HostBatch>& batches, int64_t n, const DeviceBuffer<float>& pool,
               const DeviceBuffer<int32_t>& equal_lengths, const DeviceBuffer<int32_t>& true_lengths, int passes) {
  Timing r;
  try {
    CudnnLstm lstm(h, s, shape, algo, layout);
    const bool ragged = layout == BatchLayout::Ragged;
    // Every buffer at its final size before anything is captured (prepare may move them).
    std::vector<const CudnnLstm::Batch*> padded(static_cast<size_t>(n), nullptr);
    for (int64_t i = 0; i < n; ++i) {
      const HostBatch& hb = batches[static_cast<size_t>(i)];
      if (ragged)
        lstm.prepare_ragged(hb.lengths);
      else
        padded[static_cast<size_t>(i)] = &lstm.prepare(hb.B, hb.T);
    }
    DeviceBuffer<float> w(static_cast<size_t>(lstm.weight_floats())), dw(static_cast<size_t>(lstm.weight_floats()));
    const float bound = 1.0f / std::sqrt(static_cast<float>(shape.hidden));
    launch_fill_uniform(w.get(), lstm.weight_floats(), 1, -bound, bound, s);
    launch_fill_uniform(lstm.dy(), lstm.capacity() * shape.hidden, 2, -0.1f, 0.1f, s);
    dw.zero_async(s);
    auto one = [&](int64_t i) {
      const HostBatch& hb = batches[static_cast<size_t>(i)];
      const CudnnLstm::Batch& b = ragged ? lstm.prepare_ragged(hb.lengths) : *padded[static_cast<size_t>(i)];
      const float* x = pool.get() + hb.x_offset;
      const int32_t* len = (ragged ? true_lengths.get() : equal_lengths.get()) + hb.len_offset;
      lstm.forward(b, x, w.get(), len);
      lstm.backward(b, x, w.get(), dw.get(), len);
    };
    r.plain_us = time_passes(s, passes, n, [&] {
      for (int64_t i = 0; i < n; ++i) one(i);
    });
    // One graph per batch: each replay reads its own batch in place, as a fixed-address graph must.
    std::vector<GraphExec> graphs;
    for (int64_t i = 0; i < n; ++i) {
      CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      one(i);
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

std::string timing_json(const Timing& t, int64_t K) {
  if (!t.usable) {
    std::string why;
    for (char c : t.why) why += (c == '"' || c == '\\') ? '\'' : (c == '\n' ? ' ' : c);
    return "{\"usable\": false, \"why\": \"" + why + "\"}";
  }
  return "{\"usable\": true, \"plain_us\": " + std::to_string(t.plain_us) + ", \"graph_us\": " +
         std::to_string(t.graph_us) + ", \"graph_us_per_seq\": " + std::to_string(t.graph_us / static_cast<double>(K)) +
         "}";
}

}  // namespace

int main(int argc, char** argv) {
  SyntheticSpec spec;
  int64_t hidden = 50, layers = 1, passes = 1, standard_sequences = 200, K = 1;
  std::string algo = "all", layouts = "both", out;
  po::options_description opts("cudnn_floor: the cuDNN forward+backward floor per step of K sequences");
  opts.add_options()("help,h", "show this help")
      ("sequences", po::value(&spec.sequences)->default_value(2000), "sequences (one graph per batch; as ragtrain bench)")
      ("features", po::value(&spec.features)->default_value(36), "F")
      ("min-length", po::value(&spec.min_length)->default_value(60), "shortest sequence")
      ("max-length", po::value(&spec.max_length)->default_value(130), "longest sequence")
      ("seed", po::value(&spec.seed)->default_value(1), "data seed (as ragtrain gen/bench --seed)")
      ("hidden", po::value(&hidden)->default_value(50), "H")
      ("layers", po::value(&layers)->default_value(1), "L")
      ("batch", po::value(&K)->default_value(1), "K sequences per step (sorted by length, cut into batches of K)")
      ("layouts", po::value(&layouts)->default_value("both"), "padded, ragged or both (K > 1)")
      ("passes", po::value(&passes)->default_value(1), "timed passes over the batches (after one untimed)")
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
    USER_CHECK(K >= 1, "--batch " << K, "use K >= 1");
    USER_CHECK(layouts == "padded" || layouts == "ragged" || layouts == "both", "--layouts " << layouts,
               "use padded, ragged or both");
    spec.classes = 10;
    const RaggedData data = make_synthetic(spec);
    const int64_t N = data.num_sequences(), F = spec.features;
    auto len = [&](int64_t i) { return data.offsets[static_cast<size_t>(i + 1)] - data.offsets[static_cast<size_t>(i)]; };
    double mean_t = 0;
    for (int64_t i = 0; i < N; ++i) mean_t += static_cast<double>(len(i));
    mean_t /= static_cast<double>(N);

    // Batches: data order for K = 1 (as before), else sorted by length and cut into K (the last may be short).
    std::vector<int64_t> order(static_cast<size_t>(N));
    std::iota(order.begin(), order.end(), 0);
    if (K > 1) std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return len(a) < len(b); });
    std::vector<HostBatch> batches;
    std::vector<float> pool;
    std::vector<int32_t> equal, truth;
    double padded_steps = 0, true_steps = 0;
    for (int64_t first = 0; first < N; first += K) {
      HostBatch hb;
      hb.B = std::min(K, N - first);
      for (int64_t k = 0; k < hb.B; ++k) {
        hb.lengths.push_back(static_cast<int32_t>(len(order[static_cast<size_t>(first + k)])));
        hb.T = std::max<int64_t>(hb.T, hb.lengths.back());
      }
      hb.x_offset = static_cast<int64_t>(pool.size());
      hb.len_offset = static_cast<int64_t>(equal.size());
      pool.resize(pool.size() + static_cast<size_t>(hb.T * hb.B * F), 0.0f);
      for (int64_t k = 0; k < hb.B; ++k) {
        const int64_t seq = order[static_cast<size_t>(first + k)];
        for (int64_t t = 0; t < len(seq); ++t)
          for (int64_t f = 0; f < F; ++f)
            pool[static_cast<size_t>(hb.x_offset + (t * hb.B + k) * F + f)] =
                data.features[static_cast<size_t>((data.offsets[static_cast<size_t>(seq)] + t) * F + f)];
        equal.push_back(static_cast<int32_t>(hb.T));
        truth.push_back(hb.lengths[static_cast<size_t>(k)]);
        true_steps += static_cast<double>(len(seq));
      }
      padded_steps += static_cast<double>(hb.T * hb.B);
      batches.push_back(std::move(hb));
    }

    CUDA_CHECK(cudaSetDevice(0));
    Stream stream = Stream::create();
    CudnnHandle handle = CudnnHandle::create(stream.get());
    DeviceBuffer<float> x(pool.size());
    CUDA_CHECK(cudaMemcpy(x.get(), pool.data(), x.bytes(), cudaMemcpyHostToDevice));
    DeviceBuffer<int32_t> d_equal(equal.size()), d_truth(truth.size());
    CUDA_CHECK(cudaMemcpy(d_equal.get(), equal.data(), d_equal.bytes(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_truth.get(), truth.data(), d_truth.bytes(), cudaMemcpyHostToDevice));

    std::vector<cudnnRNNAlgo_t> algos;
    if (algo == "all")
      algos = {CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H, CUDNN_RNN_ALGO_PERSIST_STATIC, CUDNN_RNN_ALGO_PERSIST_DYNAMIC,
               CUDNN_RNN_ALGO_STANDARD};
    else if (auto a = parse_rnn_algo(algo))
      algos = {*a};
    else
      throw UserError("--algo " + algo + " is not a cuDNN RNN algorithm", "use all, standard, persist_static, ...");

    const int64_t all = static_cast<int64_t>(batches.size());
    ModelShape shape;   // the LSTM alone is timed: the head's fields stay unset
    shape.input_size = F;
    shape.hidden = hidden;
    shape.layers = layers;
    std::vector<Result> results;
    for (cudnnRNNAlgo_t a : algos) {
      Result r;
      r.algo = rnn_algo_name(a);
      r.batches = a == CUDNN_RNN_ALGO_STANDARD ? std::min(all, std::max<int64_t>(1, standard_sequences / K)) : all;
      for (int64_t i = 0; i < r.batches; ++i) r.sequences += batches[static_cast<size_t>(i)].B;
      const bool both = K > 1 && layouts == "both";
      if (layouts != "ragged" || K == 1)
        r.padded = measure(handle.get(), stream.get(), a, BatchLayout::Padded, shape, batches, r.batches, x,
                           d_equal, d_truth, static_cast<int>(passes));
      if (K > 1 && (both || layouts == "ragged"))
        r.ragged = measure(handle.get(), stream.get(), a, BatchLayout::Ragged, shape, batches, r.batches, x,
                           d_equal, d_truth, static_cast<int>(passes));
      results.push_back(std::move(r));
    }

    std::printf("# cuDNN %zu floor: F=%lld H=%lld L=%lld, %lld sequences of lengths %lld..%lld (mean %.1f), K=%lld "
                "per step (%lld batches, padding %.2f%% of the padded timesteps), forward(training)+backward "
                "data+backward weights per step\n",
                cudnnGetVersion(), static_cast<long long>(F), static_cast<long long>(hidden),
                static_cast<long long>(layers), static_cast<long long>(N), static_cast<long long>(spec.min_length),
                static_cast<long long>(spec.max_length), mean_t, static_cast<long long>(K), static_cast<long long>(all),
                100.0 * (1.0 - true_steps / padded_steps));
    std::printf("# %-24s %-7s %8s %12s %12s %12s %14s\n", "algorithm", "layout", "batches", "plain", "graph",
                "graph/seq", "graph seq/s");
    std::printf("# %-24s %-7s %8s %12s %12s %12s %14s\n", "", "", "", "(us/step)", "(us/step)", "(us)", "(1/s)");
    double best = 0;
    std::string best_algo, best_layout;
    std::string json = "{\"benchmark\": \"cudnn_floor\", \"cudnn_version\": " + std::to_string(cudnnGetVersion()) +
                       ", \"features\": " + std::to_string(F) + ", \"hidden\": " + std::to_string(hidden) +
                       ", \"layers\": " + std::to_string(layers) + ", \"sequences\": " + std::to_string(N) +
                       ", \"batch\": " + std::to_string(K) + ", \"mean_length\": " + std::to_string(mean_t) +
                       ", \"padding_fraction\": " + std::to_string(1.0 - true_steps / padded_steps) +
                       ", \"algorithms\": {";
    bool first = true;
    for (const Result& r : results) {
      for (const auto& [name, t] : {std::make_pair(std::string("padded"), &r.padded),
                                    std::make_pair(std::string("ragged"), &r.ragged)}) {
        if (!t->usable && t->why.empty()) continue;   // not measured
        if (t->usable) {
          std::printf("  %-24s %-7s %8lld %12.1f %12.1f %12.2f %14.1f\n", r.algo.c_str(), name.c_str(),
                      static_cast<long long>(r.batches), t->plain_us, t->graph_us, t->graph_us / static_cast<double>(K),
                      1e6 * static_cast<double>(r.sequences) / (t->graph_us * static_cast<double>(r.batches)));
          // The floor is taken over the whole set only (the standard algorithm may be timed on a prefix).
          if (r.batches == all && (best == 0 || t->graph_us < best)) best = t->graph_us, best_algo = r.algo, best_layout = name;
        } else {
          std::printf("  %-24s %-7s %8s %12s   %.160s\n", r.algo.c_str(), name.c_str(), "-", "refused", t->why.c_str());
        }
      }
      json += std::string(first ? "" : ", ") + "\"" + r.algo + "\": {\"batches\": " + std::to_string(r.batches) +
              ", \"sequences\": " + std::to_string(r.sequences) + ", \"padded\": " + timing_json(r.padded, K) +
              ", \"ragged\": " + (K > 1 ? timing_json(r.ragged, K) : std::string("null")) + "}";
      first = false;
    }
    // Per step of K (for K = 1: per sequence, as the batch-one floor always was).
    json += "}, \"best_algorithm\": \"" + best_algo + "\", \"best_layout\": \"" + best_layout +
            "\", \"floor_us\": " + std::to_string(best) + ", \"floor_us_per_seq\": " +
            std::to_string(best * static_cast<double>(all) / static_cast<double>(N)) + "}\n";
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
