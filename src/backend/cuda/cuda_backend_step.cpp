// The CUDA backend's training step: the step's slots, the fused kernel or the cuDNN batch (gather, LSTM, head and
// loss, replayed from a CUDA graph per shape), the next step's work launched ahead, the all-reduce, the fused
// optimizer and the one host wait for the step's totals.
#include "cuda_backend.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "dropout.hpp"
#include "fused_optimizer.hpp"
#include "head_loss.hpp"
#include "ragtrain/core/error_cuda.hpp"
#include "ragtrain/model/dropout_mask.hpp"

namespace ragtrain {

GatherArgs CudaBackend::gather_args(const CudnnLstm::Batch& b) const {
  const bool cls = shape_.task == Task::Classification;
  GatherArgs a;
  a.x = lstm_->x_staging();
  a.features = shard_.features;
  a.dy = lstm_->dy();
  a.cudnn_lengths = lstm_->device_lengths();
  a.lengths = slot_lengths_.get();
  a.label = cls ? label_slot_.get() : nullptr;
  a.labels = cls ? shard_.labels : nullptr;
  a.target = cls ? nullptr : target_slot_.get();
  a.targets = cls ? nullptr : shard_.targets;
  a.B = static_cast<int32_t>(b.B);
  a.T = static_cast<int32_t>(b.T);
  a.F = static_cast<int32_t>(shape_.input_size);
  a.H = static_cast<int32_t>(shape_.head_input());
  a.C = static_cast<int32_t>(shape_.outputs);
  a.ragged = lstm_->layout() == BatchLayout::Ragged;
  a.seq = seq_slot_.get();
  a.indices = shard_.indices;
  a.step_out = step_dev_.get();
  a.step = global_step_;
  return a;
}

DropoutArgs CudaBackend::dropout_args(double p) const {
  DropoutArgs d;
  d.threshold = dropout_threshold(p);
  d.scale = static_cast<float>(dropout_scale(p));
  d.seed = seed_;
  d.step = step_dev_.get();
  d.seq = seq_slot_.get();
  return d;
}

FusedHeadDropout CudaBackend::fused_dropout(double p, int64_t step) const {
  FusedHeadDropout d;
  if (p <= 0) return d;
  d.threshold = dropout_threshold(p);
  d.scale = static_cast<float>(dropout_scale(p));
  d.seed = seed_;
  d.step = step;
  d.indices = shard_.indices;
  return d;
}

void CudaBackend::enqueue_batch(const CudnnLstm::Batch& b) {
  const cudaStream_t s = compute_.get();
  const int64_t H = shape_.head_input(), C = shape_.outputs;
  const bool cls = shape_.task == Task::Classification;
  lstm_->forward(b, lstm_->x_staging(), params_.get());
  HeadArgs a;
  a.y = lstm_->y();
  a.dy = lstm_->dy();
  a.lengths = slot_lengths_.get();
  a.batch = static_cast<int32_t>(b.B);
  a.weight = params_.get() + W_;
  a.bias = params_.get() + W_ + C * H;
  a.hidden = static_cast<int32_t>(shape_.hidden);
  a.outputs = static_cast<int32_t>(C);
  a.directions = static_cast<int32_t>(shape_.directions());
  a.pool = static_cast<int32_t>(shape_.pool);
  a.dropout = dropout_args(dropout_.head);
  a.classification = cls;
  a.labels = cls ? label_slot_.get() : nullptr;
  a.targets = cls ? nullptr : target_slot_.get();
  a.d_weight = fused_.get() + W_;
  a.d_bias = fused_.get() + W_ + C * H;
  a.extras = fused_.get() + N_;
  launch_head_loss_grad(a, s);
  lstm_->backward(b, lstm_->x_staging(), params_.get(), fused_.get());
}

bool CudaBackend::capture_graph(const CudnnLstm::Batch& b, const GatherArgs& ga) {
  const cudaStream_t s = compute_.get();
  std::string why;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    // The gather is the graph's first node; later launches repoint it at their batch (update_gather_node).
    launch_gather_batch(ga, slots_, s);
    enqueue_batch(b);
  } catch (const std::exception& e) {
    why = e.what();
  }
  cudaGraph_t raw = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &raw);   // always end the capture, also after a failure
  Graph graph(raw);
  cudaGraphExec_t exec = nullptr;
  if (why.empty() && end == cudaSuccess) {
    const cudaGraphNode_t gather = find_gather_node(graph.get());
    const cudaError_t inst = gather ? cudaGraphInstantiate(&exec, graph.get(), 0) : cudaErrorInvalidValue;
    if (inst == cudaSuccess) {
      graphs_.emplace(std::make_pair(b.B, b.T), ShapeGraph{std::move(graph), GraphExec(exec), gather});
      return true;
    }
    why = gather ? RT_MSG("cudaGraphInstantiate: " << cudaGetErrorString(inst)) : "no gather node in the graph";
  } else if (why.empty()) {
    why = RT_MSG("cudaStreamEndCapture: " << cudaGetErrorString(end));
  }
  cudaGetLastError();   // capture errors are not sticky; the stream works normally again
  graphs_on_ = false;
  graphs_off_reason_ = "off (capture failed: " + why + ")";
  std::fprintf(stderr, "ragtrain: CUDA graph capture failed for %lld sequences of length %lld, running without "
               "graphs: %s\n", static_cast<long long>(b.B), static_cast<long long>(b.T), why.c_str());
  return false;
}

void CudaBackend::run_batch(int64_t T) {
  const cudaStream_t s = compute_.get();
  const int64_t B = static_cast<int64_t>(slots_.size());
  // Ragged layout with unequal lengths: the lengths are baked into cuDNN's launches, so plain launches.
  bool equal = true;
  for (const GatherSlot& g : slots_) equal = equal && g.length == T;
  if (lstm_->layout() == BatchLayout::Ragged && !equal) {
    std::vector<int32_t> lengths;
    for (const GatherSlot& g : slots_) lengths.push_back(g.length);
    const CudnnLstm::Batch& b = lstm_->prepare_ragged(lengths);
    if (lstm_->generation() != graph_generation_) {
      graphs_.clear();
      graph_generation_ = lstm_->generation();
    }
    launch_gather_batch(gather_args(b), slots_, s);
    enqueue_batch(b);
    return;
  }
  const CudnnLstm::Batch& b = lstm_->prepare(B, T);   // host-side unless a buffer must grow (then it waits)
  if (lstm_->generation() != graph_generation_) {
    graphs_.clear();   // they captured buffer addresses that moved
    graph_generation_ = lstm_->generation();
  }
  const GatherArgs ga = gather_args(b);
  if (!graphs_on_) {
    launch_gather_batch(ga, slots_, s);
    enqueue_batch(b);
    return;
  }
  const std::pair<int64_t, int64_t> key{B, T};
  auto it = graphs_.find(key);
  if (it != graphs_.end()) {
    // Replay: the graph's gather node now reads this batch (a host-side update, no extra launch).
    update_gather_node(it->second.exec.get(), it->second.gather, ga, slots_);
    CUDA_CHECK(cudaGraphLaunch(it->second.exec.get(), s));
    return;
  }
  // Second time at this shape: capture (gather included) and launch.
  if (!seen_.insert(key).second && capture_graph(b, ga)) {
    CUDA_CHECK(cudaGraphLaunch(graphs_.at(key).exec.get(), s));
    return;
  }
  // First time at this shape (cuDNN's lazy set-up happens outside any capture), or capture impossible.
  launch_gather_batch(ga, slots_, s);
  enqueue_batch(b);
}

int64_t CudaBackend::slots_for(const std::vector<int64_t>& positions, std::vector<GatherSlot>& out) const {
  const int64_t n = static_cast<int64_t>(offsets_.size()) - 1;
  out.clear();
  int64_t T = 0;
  for (int64_t pos : positions) {
    if (pos < 0) continue;
    RT_CHECK(pos < n, "shard position " << pos << " outside [0, " << n << ")");
    const int64_t begin = offsets_[static_cast<size_t>(pos)], len = offsets_[static_cast<size_t>(pos + 1)] - begin;
    out.push_back(GatherSlot{begin, static_cast<int32_t>(len), static_cast<int32_t>(pos)});
    T = std::max(T, len);
  }
  return T;
}

void CudaBackend::forward_backward(const std::vector<int64_t>& positions) {
  RT_CHECK(have_shard_, "set_train_shard first");
  // Every buffer, graph and measurement is for the K given at construction (BackendOptions::batch).
  RT_CHECK(static_cast<int64_t>(positions.size()) <= batch_,
           "forward_backward with " << positions.size() << " slots; the backend was built for " << batch_);
  const cudaStream_t s = compute_.get();
  StepEvents& ev = current();
  // The step's sequences, empty slots (-1: the uneven last step) left out: B <= K sequences, T the longest.
  const int64_t T = slots_for(positions, slots_);
  // Launched by the previous update with exactly these sequences (prepare_next): only its end event is left.
  const bool taken = ahead_ && use_fused_ && slots_ == ahead_slots_ && ahead_step_ == global_step_;
  ahead_ = false;
  if (taken) {
    if (ev.timed) CUDA_CHECK(cudaEventRecord(ev.fb_end.get(), s));
    return;
  }
  begin_events(ev, step_);
  // The contract is "zero, then add"; the update already left the buffer zeroed unless nothing consumed it (or
  // work launched ahead added to it and was not taken).
  if (!fused_clean_) fused_.zero_async(s);
  fused_clean_ = false;
  if (ev.timed) CUDA_CHECK(cudaEventRecord(ev.fb_start.get(), s));
  if (!slots_.empty() && use_fused_)
    fused_lstm_->run(slots_, shard_.features, shard_.labels, shard_.targets, params_.get(), fused_.get(), s,
                     fused_dropout(dropout_.head, global_step_), fused_dropout(dropout_.between, global_step_));
  else if (!slots_.empty())
    run_batch(T);
  if (ev.timed) CUDA_CHECK(cudaEventRecord(ev.fb_end.get(), s));
}

void CudaBackend::prepare_next(const std::vector<int64_t>& positions) {
  next_pending_ = false;
  if (!use_fused_ || !have_shard_ || static_cast<int64_t>(positions.size()) > batch_) return;
  slots_for(positions, next_slots_);
  next_pending_ = !next_slots_.empty();
}

void CudaBackend::launch_ahead() {
  if (!next_pending_) return;
  next_pending_ = false;
  // Ordered after this step's update on the stream (the projection waits for it as a programmatic dependent
  // launch); the ring entry it takes is two steps old, harvested just before.
  const cudaStream_t s = compute_.get();
  StepEvents& ev = ring_[static_cast<size_t>((step_ + 1) % 3)];
  if (ev.step == step_ - 2 && !ev.harvested) {   // complete (the update waited for it), but not yet seen
    CUDA_CHECK(cudaEventSynchronize(ev.opt_end.get()));
    harvest(step_ - 2);
  }
  begin_events(ev, step_ + 1);
  if (ev.timed) CUDA_CHECK(cudaEventRecord(ev.fb_start.get(), s));
  // The trainer's next step is the next global step (a caller that sets another one is not taken: the check above).
  fused_lstm_->run(next_slots_, shard_.features, shard_.labels, shard_.targets, params_.get(), fused_.get(), s,
                   fused_dropout(dropout_.head, global_step_ + 1), fused_dropout(dropout_.between, global_step_ + 1));
  ahead_step_ = global_step_ + 1;
  ahead_slots_.swap(next_slots_);
  ahead_ = true;
  fused_clean_ = false;
}

void CudaBackend::allreduce() {
  StepEvents& ev = current();
  if (single_rank_) {
    // The sum over one rank is the buffer itself: no NCCL call and no hop to and from its stream (identical to
    // NCCL's one-rank result). The event stays: it splits the phases (seen on the H200: 1.3 us between it and
    // fb_end, with nothing in between).
    if (ev.timed) CUDA_CHECK(cudaEventRecord(ev.ar_end.get(), compute_.get()));
    ev.allreduced = true;
    return;
  }
  // NCCL runs on its own stream, after the gradients are complete and before the update reads them.
  CUDA_CHECK(cudaStreamWaitEvent(comm_stream_.get(), ev.fb_end.get(), 0));
  nccl_->allreduce_sum(fused_.get(), N_ + kFusedExtras, comm_stream_.get());
  CUDA_CHECK(cudaEventRecord(ev.ar_end.get(), comm_stream_.get()));
  ev.allreduced = true;
}

StepTotals CudaBackend::update(float lr) {
  const cudaStream_t s = compute_.get();
  StepEvents& ev = current();
  if (!ev.allreduced && ev.timed) CUDA_CHECK(cudaEventRecord(ev.ar_end.get(), s));   // no allreduce() call
  if (!single_rank_) CUDA_CHECK(cudaStreamWaitEvent(s, ev.ar_end.get(), 0));   // else recorded on this stream

  // Step-dependent scalars exactly as the CPU optimizer computes them (float from double).
  const OptimizerConfig& c = opt_.config();
  const int64_t t = opt_.steps_taken() + 1;
  OptimizerArgs a;
  a.n = N_;
  a.params = params_.get();
  a.grads = fused_.get();
  a.extras = fused_.get() + N_;
  a.m = m_.get();
  a.v = v_.size() ? v_.get() : nullptr;
  a.partials = partials_.get();
  a.readback = readback_.device_ptr();
  a.tag = static_cast<double>(opt_launches_ + 1);   // unique per launch, also after a step that threw
  a.barrier = barrier_.get();
  a.launch = opt_launches_;
  a.blocks = opt_blocks_;
  a.kind = c.kind == OptimizerKind::Sgd ? 0 : (c.kind == OptimizerKind::Adam ? 1 : 2);
  a.lr = lr;
  a.momentum = static_cast<float>(c.momentum);
  a.weight_decay = static_cast<float>(c.weight_decay);
  a.beta1 = static_cast<float>(c.beta1);
  a.beta2 = static_cast<float>(c.beta2);
  a.eps = static_cast<float>(c.eps);
  const float bc1 = static_cast<float>(1.0 - std::pow(c.beta1, static_cast<double>(t)));
  a.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(c.beta2, static_cast<double>(t))));
  a.step_size = lr / bc1;
  a.first_step = t == 1;
  a.clip = c.clip;
  opt_pdl_ = launch_optimizer_step(a, s, opt_pdl_);
  ++opt_launches_;
  if (ev.end_marked) CUDA_CHECK(cudaEventRecord(ev.opt_end.get(), s));
  fused_clean_ = true;

  // While the GPU works: phase times of earlier steps (only those whose events completed), then the next step's
  // forward and backward if the caller said which sequences it takes (prepare_next).
  harvest(step_ - 2);
  harvest(step_ - 1);
  launch_ahead();
  // The one host wait of a step: the totals the training loop logs. The update kernel writes them to mapped host
  // memory before it updates the parameters, so the host goes on while the update still runs; everything the
  // next step launches is ordered after it on the stream.
  wait_for_totals(ev, a.tag);
  StepTotals tot;
  tot.loss_sum = readback_[0];
  tot.count = readback_[1];
  tot.correct = readback_[2];
  tot.grad_norm = readback_[3];
  RT_CHECK(tot.count > 0, "a global step without sequences");
  // The kernel skipped the update on exactly these values (fused_optimizer.cu): no extra wait or transfer.
  tot.finite = std::isfinite(tot.loss_sum) && std::isfinite(tot.grad_norm);
  if (tot.finite) opt_.set_steps_taken(t);
  ++step_;
  return tot;
}

LocalNonfinite CudaBackend::first_nonfinite(const std::vector<int64_t>& positions) {
  drop_ahead();
  // The failure path only: one sequence at a time, each read back (a host wait per sequence is fine here).
  for (size_t k = 0; k < positions.size(); ++k) {
    if (positions[k] < 0) continue;
    forward_backward({positions[k]});
    const std::vector<float> f = fused_buffer();
    LocalNonfinite r;
    r.loss = !std::isfinite(f[static_cast<size_t>(layout_.total())]);
    bool bad = r.loss;
    for (int64_t i = 0; i < layout_.total() && !bad; ++i) bad = !std::isfinite(f[static_cast<size_t>(i)]);
    if (bad) {
      r.slot = static_cast<int64_t>(k);
      return r;
    }
  }
  return {};
}

void CudaBackend::wait_for_totals(const StepEvents& ev, double tag) {
  const volatile double* tag_word = readback_.get() + 4;
  // With other ranks the step's work includes NCCL's all-reduce, which a peer that died or stopped never lets
  // finish: then this loop would spin forever. So it also watches the communicator's errors and the deadline
  // (--comm-timeout); either ends the job naming the missing rank (NcclComm::check, comm/watchdog.hpp).
  const Deadline deadline = single_rank_ ? Deadline::never() : nccl_->deadline();
  for (uint64_t spins = 1;; ++spins) {
    if (*tag_word == tag) break;
    // Now and then: did the stream finish (or fail) without the tag? Then report instead of spinning forever.
    if (spins % 256 == 0) {
      // Single rank: the stream's state is the update's, or that of a step launched ahead behind it (which only
      // delays this check until that step ends).
      const cudaError_t q = ev.end_marked ? cudaEventQuery(ev.opt_end.get()) : cudaStreamQuery(compute_.get());
      if (q == cudaErrorNotReady) {
        if (!single_rank_) nccl_->check(deadline, "the NCCL gradient all-reduce");
        continue;
      }
      CUDA_CHECK(q);
      RT_CHECK(*tag_word == tag, "the optimizer kernel finished without publishing the step's totals");
      break;
    }
  }
  std::atomic_thread_fence(std::memory_order_acquire);   // read the totals after the tag
}

}  // namespace ragtrain
