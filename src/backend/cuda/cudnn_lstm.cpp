// cuDNN LSTM: descriptors, buffers, the three RNN calls, the weight-space map and the algorithm measurement.
#include "cudnn_lstm.hpp"

#include <algorithm>
#include <cmath>

#include "device_kernels.hpp"
#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {

const char* rnn_algo_name(cudnnRNNAlgo_t algo) {
  switch (algo) {
    case CUDNN_RNN_ALGO_STANDARD: return "standard";
    case CUDNN_RNN_ALGO_PERSIST_STATIC: return "persist_static";
    case CUDNN_RNN_ALGO_PERSIST_DYNAMIC: return "persist_dynamic";
    case CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H: return "persist_static_small_h";
    default: return "unknown";
  }
}

std::optional<cudnnRNNAlgo_t> parse_rnn_algo(const std::string& name) {
  for (cudnnRNNAlgo_t a : {CUDNN_RNN_ALGO_STANDARD, CUDNN_RNN_ALGO_PERSIST_STATIC, CUDNN_RNN_ALGO_PERSIST_DYNAMIC,
                           CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H})
    if (name == rnn_algo_name(a)) return a;
  return std::nullopt;
}

CudnnLstm::CudnnLstm(cudnnHandle_t handle, cudaStream_t stream, int64_t input_size, int64_t hidden, int64_t layers,
                     cudnnRNNAlgo_t algo)
    : handle_(handle), stream_(stream), F_(input_size), H_(hidden), L_(layers), algo_(algo) {
  RT_CHECK(F_ > 0 && H_ > 0 && L_ > 0 && F_ <= INT32_MAX && H_ <= INT32_MAX && L_ <= INT32_MAX,
           "LSTM shape F=" << F_ << " H=" << H_ << " L=" << L_);
  dropout_ = DropoutDesc::create();
  // Dropout 0 needs no state buffer (what PyTorch passes for a model without dropout).
  CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout_.get(), handle_, 0.0f, nullptr, 0, 0));
  rnn_ = RnnDesc::create();
  // FP32 storage and math with CUDNN_FMA_MATH: FMA kernels only, no TF32 tensor-op conversion, so results agree
  // with the CPU reference to float rounding. projSize == H means no projection. DOUBLE_BIAS maps b_ih and b_hh.
  CUDNN_CHECK(cudnnSetRNNDescriptor_v8(rnn_.get(), algo_, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL,
                                       CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH,
                                       static_cast<int32_t>(F_), static_cast<int32_t>(H_), static_cast<int32_t>(H_),
                                       static_cast<int32_t>(L_), dropout_.get(), CUDNN_RNN_PADDED_IO_DISABLED));
  if (algo_ == CUDNN_RNN_ALGO_PERSIST_DYNAMIC) CUDNN_CHECK(cudnnBuildRNNDynamic(handle_, rnn_.get(), 1));
  CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(handle_, rnn_.get(), &weight_bytes_));
  h_desc_ = TensorDesc::create();
  const int dims[3] = {static_cast<int>(L_), 1, static_cast<int>(H_)};
  const int strides[3] = {static_cast<int>(H_), static_cast<int>(H_), 1};
  CUDNN_CHECK(cudnnSetTensorNdDescriptor(h_desc_.get(), CUDNN_DATA_FLOAT, 3, dims, strides));
  hy_.resize_discard(static_cast<size_t>(L_ * H_));
  dhy_.resize_discard(static_cast<size_t>(L_ * H_));
  dhy_.zero_async(stream_);
}

std::vector<int64_t> CudnnLstm::pytorch_to_weight_space(const ParamLayout& layout, const float* weights) const {
  RT_CHECK(layout.shape().input_size == F_ && layout.shape().hidden == H_ && layout.shape().layers == L_,
           "layout does not match the LSTM");
  const int64_t lstm_params = layout.fc_weight().offset;   // the LSTM tensors come first
  std::vector<int64_t> map(static_cast<size_t>(lstm_params), -1);
  TensorDesc m = TensorDesc::create(), b = TensorDesc::create();
  for (int64_t l = 0; l < L_; ++l) {
    // linLayerID 0-3: input-to-hidden matrices and b_ih for gates i, f, g, o; 4-7: hidden-to-hidden and b_hh.
    for (int id = 0; id < 8; ++id) {
      void* m_addr = nullptr;
      void* b_addr = nullptr;
      CUDNN_CHECK(cudnnGetRNNWeightParams(handle_, rnn_.get(), static_cast<int32_t>(l), weight_bytes_, weights, id,
                                          m.get(), &m_addr, b.get(), &b_addr));
      RT_CHECK(m_addr && b_addr, "cuDNN gave no address for layer " << l << " id " << id);
      const bool input_side = id < 4;
      const int64_t gate = id % 4;
      const int64_t cols = input_side ? (l == 0 ? F_ : H_) : H_;
      const ParamTensor& wt = input_side ? layout.w_ih(l) : layout.w_hh(l);
      const ParamTensor& bt = input_side ? layout.b_ih(l) : layout.b_hh(l);

      cudnnDataType_t type;
      int nb = 0, dims[3] = {0, 0, 0}, strides[3] = {0, 0, 0};
      CUDNN_CHECK(cudnnGetTensorNdDescriptor(m.get(), 3, &type, &nb, dims, strides));
      RT_CHECK(nb == 3 && type == CUDNN_DATA_FLOAT && static_cast<int64_t>(dims[0]) * dims[1] * dims[2] == H_ * cols &&
                   dims[1] == H_ && dims[2] == cols,
               "unexpected cuDNN matrix shape " << dims[0] << "x" << dims[1] << "x" << dims[2] << " for layer " << l
                                                << " id " << id);
      const int64_t m_base = static_cast<const float*>(m_addr) - weights;
      for (int64_t r = 0; r < H_; ++r)
        for (int64_t c = 0; c < cols; ++c)
          map[static_cast<size_t>(wt.offset + (gate * H_ + r) * cols + c)] = m_base + r * strides[1] + c * strides[2];

      CUDNN_CHECK(cudnnGetTensorNdDescriptor(b.get(), 3, &type, &nb, dims, strides));
      RT_CHECK(nb == 3 && static_cast<int64_t>(dims[0]) * dims[1] * dims[2] == H_,
               "unexpected cuDNN bias shape for layer " << l << " id " << id);
      const int64_t b_base = static_cast<const float*>(b_addr) - weights;
      const int64_t b_stride = dims[1] == H_ ? strides[1] : (dims[2] == H_ ? strides[2] : strides[0]);
      for (int64_t r = 0; r < H_; ++r)
        map[static_cast<size_t>(bt.offset + gate * H_ + r)] = b_base + r * b_stride;
    }
  }
  // Every PyTorch element must land on its own weight-space slot.
  std::vector<char> used(static_cast<size_t>(weight_floats()), 0);
  for (int64_t k : map) {
    RT_CHECK(k >= 0 && k < weight_floats(), "weight-space index " << k << " outside [0, " << weight_floats() << ")");
    RT_CHECK(!used[static_cast<size_t>(k)], "two parameters map to weight-space index " << k);
    used[static_cast<size_t>(k)] = 1;
  }
  return map;
}

const CudnnLstm::LengthDescs& CudnnLstm::descs(int64_t T) {
  auto it = by_length_.find(T);
  if (it != by_length_.end()) return it->second;
  LengthDescs d{RnnDataDesc::create(), RnnDataDesc::create()};
  const int len = static_cast<int>(T);
  CUDNN_CHECK(cudnnSetRNNDataDescriptor(d.x.get(), CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, len, 1,
                                        static_cast<int>(F_), &len, nullptr));
  CUDNN_CHECK(cudnnSetRNNDataDescriptor(d.y.get(), CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, len, 1,
                                        static_cast<int>(H_), &len, nullptr));
  CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(handle_, rnn_.get(), CUDNN_FWD_MODE_TRAINING, d.x.get(), &d.work, &d.reserve));
  return by_length_.emplace(T, std::move(d)).first->second;
}

void CudnnLstm::prepare(int64_t T) {
  RT_CHECK(T >= 1 && T <= INT32_MAX, "sequence length " << T);
  const LengthDescs& d = descs(T);   // the per-step fast path: one hash lookup
  const size_t work = d.work, reserve = d.reserve;
  const bool longer = T > max_T_;
  if (!longer && work <= work_.size() && reserve <= reserve_.size()) return;
  // Work queued on the stream may still use the old buffers: let it finish before they are freed.
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (longer) {
    max_T_ = T;
    const size_t n = static_cast<size_t>(T);
    std::vector<int32_t> lengths(n + 1);
    for (size_t i = 0; i <= n; ++i) lengths[i] = static_cast<int32_t>(i);
    seq_lengths_.resize_discard(n + 1);
    CUDA_CHECK(cudaMemcpyAsync(seq_lengths_.get(), lengths.data(), (n + 1) * sizeof(int32_t), cudaMemcpyHostToDevice,
                               stream_));
    x_stage_.resize_discard(n * static_cast<size_t>(F_));
    y_.resize_discard(n * static_cast<size_t>(H_));
    dy_.resize_discard(n * static_cast<size_t>(H_));
    dy_.zero_async(stream_);
    dx_.resize_discard(n * static_cast<size_t>(F_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));   // `lengths` is pageable host memory that goes out of scope
  }
  work_.reserve_discard(std::max<size_t>(work, 1));
  reserve_.reserve_discard(std::max<size_t>(reserve, 1));
  ++generation_;
}

void CudnnLstm::forward(int64_t T, const float* x, const float* weights) {
  RT_CHECK(T >= 1 && T <= max_T_, "sequence length " << T << " not prepared (max " << max_T_ << ")");
  const LengthDescs& d = descs(T);
  CUDNN_CHECK(cudnnRNNForward(handle_, rnn_.get(), CUDNN_FWD_MODE_TRAINING, seq_lengths_.get() + T, d.x.get(), x,
                              d.y.get(), y_.get(), h_desc_.get(), nullptr, hy_.get(), h_desc_.get(), nullptr, nullptr,
                              weight_bytes_, weights, work_.bytes(), work_.get(), reserve_.bytes(), reserve_.get()));
}

void CudnnLstm::backward(int64_t T, const float* x, const float* weights, float* d_weights) {
  RT_CHECK(T >= 1 && T <= max_T_, "sequence length " << T << " not prepared (max " << max_T_ << ")");
  const LengthDescs& d = descs(T);
  // Zero initial states (hx = cx = null) as in PyTorch; dhx/dcx are not needed, dcy is zero (null).
  CUDNN_CHECK(cudnnRNNBackwardData_v8(handle_, rnn_.get(), seq_lengths_.get() + T, d.y.get(), y_.get(), dy_.get(),
                                      d.x.get(), dx_.get(), h_desc_.get(), nullptr, dhy_.get(), nullptr,
                                      h_desc_.get(), nullptr, nullptr, nullptr, weight_bytes_, weights, work_.bytes(),
                                      work_.get(), reserve_.bytes(), reserve_.get()));
  CUDNN_CHECK(cudnnRNNBackwardWeights_v8(handle_, rnn_.get(), CUDNN_WGRAD_MODE_ADD, seq_lengths_.get() + T,
                                         d.x.get(), x, h_desc_.get(), nullptr, d.y.get(), y_.get(), weight_bytes_,
                                         d_weights, work_.bytes(), work_.get(), reserve_.bytes(), reserve_.get()));
}

std::vector<AlgoTiming> measure_algorithms(cudnnHandle_t handle, cudaStream_t stream, int64_t input_size,
                                           int64_t hidden, int64_t layers, int64_t T,
                                           const std::vector<cudnnRNNAlgo_t>& candidates) {
  std::vector<AlgoTiming> out;
  for (cudnnRNNAlgo_t algo : candidates) {
    AlgoTiming t;
    t.algo = algo;
    try {
      CudnnLstm lstm(handle, stream, input_size, hidden, layers, algo);
      lstm.prepare(T);
      DeviceBuffer<float> w(static_cast<size_t>(lstm.weight_floats())), dw(static_cast<size_t>(lstm.weight_floats()));
      const float bound = 1.0f / std::sqrt(static_cast<float>(hidden));
      launch_fill_uniform(w.get(), lstm.weight_floats(), 11, -bound, bound, stream);
      launch_fill_uniform(lstm.x_staging(), T * input_size, 12, -1.0f, 1.0f, stream);
      launch_fill_uniform(lstm.d_h_last(), hidden, 13, -0.1f, 0.1f, stream);
      dw.zero_async(stream);
      auto once = [&] {
        lstm.forward(T, lstm.x_staging(), w.get());
        lstm.backward(T, lstm.x_staging(), w.get(), dw.get());
      };
      once();   // warm-up: module loading, cuDNN's first-call set-up
      CUDA_CHECK(cudaStreamSynchronize(stream));
      Event start = Event::create(true), stop = Event::create(true);
      std::vector<double> us;
      for (int rep = 0; rep < 5; ++rep) {
        CUDA_CHECK(cudaEventRecord(start.get(), stream));
        once();
        CUDA_CHECK(cudaEventRecord(stop.get(), stream));
        CUDA_CHECK(cudaEventSynchronize(stop.get()));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
        us.push_back(1e3 * ms);
      }
      std::sort(us.begin(), us.end());
      t.us = us[us.size() / 2];
      t.usable = true;
    } catch (const std::exception& e) {
      cudaStreamSynchronize(stream);
      cudaGetLastError();   // an unsupported configuration leaves a non-sticky error behind
      t.why = e.what();
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace ragtrain
