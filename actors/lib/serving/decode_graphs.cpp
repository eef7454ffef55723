#include "actors/lib/serving/decode_graphs.hpp"

#include <ATen/ATen.h>

#include <chrono>
#include <cstring>
#include <map>
#include <stdexcept>

#include "kernels/attention/paged_attention.hpp"

#ifdef MILESRT_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace milesrt::serving {

namespace {
std::vector<int64_t> make_buckets(int64_t max_batch) {
  std::vector<int64_t> b;
  for (int64_t x : {1, 2, 4, 8})
    if (x <= max_batch) b.push_back(x);
  for (int64_t x = 16; x <= max_batch; x += 8) b.push_back(x);
  if (b.empty() || b.back() < max_batch) b.push_back(max_batch);
  return b;
}
}  // namespace

bool decode_graphs::supported(const llm::decoder& model, const llm::kv_cache& cache) {
#ifdef MILESRT_TORCH_CUDA
  (void)model;
  return cache.paged_kernels();
#else
  (void)model;
  (void)cache;
  return false;
#endif
}

int64_t decode_graphs::bucket(int64_t n) const {
  for (int64_t b : buckets_)
    if (b >= n) return b;
  return 0;
}

#ifdef MILESRT_TORCH_CUDA

struct decode_graphs::impl {
  const llm::decoder& model;
  llm::kv_cache& cache;
  int32_t dummy;
  int64_t bmax;
  bool use_graphs;
  int64_t capacity = 0;  // kv_indices entries the static buffer holds
  // Static device inputs: int32 ids | positions | slots | kv_indptr (bmax+1) | kv_last | kv_indices
  // (capacity); int64 seeds; float temperatures. Outputs: int64 tokens, float log-probs | entropies.
  at::Tensor meta, seeds, temps, token, result;
  // float64 [3 bmax + moe_layers bmax k]: a step's tokens | log-probs | entropies | MoE routing (per
  // MoE layer, each row's top-k experts), read back in one copy.
  at::Tensor packed;
  int64_t moe_layers = 0, top_k = 0;
  at::Tensor meta_h, seeds_h, temps_h;  // page-locked staging
  std::shared_ptr<kernels::paged_attention> attention;
  std::map<int64_t, std::unique_ptr<at::cuda::CUDAGraph>> graphs;
  c10::MempoolId_t pool{0, 0};
  const void* params_ptr = nullptr;
  at::cuda::CUDAStream stream;

  impl(const llm::decoder& m, llm::kv_cache& c, int32_t d, int64_t b, bool g)
      : model(m), cache(c), dummy(d), bmax(b), use_graphs(g),
        stream(at::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(m.device().index() < 0 ? 0 : m.device().index()))) {
    const auto dev = m.device();
    seeds = at::zeros({bmax}, at::TensorOptions().dtype(at::kLong).device(dev));
    temps = at::ones({bmax}, at::TensorOptions().dtype(at::kFloat).device(dev));
    token = at::zeros({bmax}, at::TensorOptions().dtype(at::kLong).device(dev));
    result = at::zeros({2 * bmax}, at::TensorOptions().dtype(at::kFloat).device(dev));
    for (int64_t l = 0; l < m.config().num_layers; ++l) moe_layers += m.config().is_moe_layer(l) ? 1 : 0;
    top_k = moe_layers > 0 ? m.config().num_experts_per_tok : 0;
    packed = at::zeros({3 * bmax + moe_layers * bmax * top_k}, at::TensorOptions().dtype(at::kDouble).device(dev));
    seeds_h = at::empty({bmax}, at::TensorOptions().dtype(at::kLong).pinned_memory(true));
    temps_h = at::empty({bmax}, at::TensorOptions().dtype(at::kFloat).pinned_memory(true));
    attention = std::make_shared<kernels::paged_attention>(cache.attention_float_ws.data_ptr(),
                                                           cache.attention_int_ws.data_ptr(),
                                                           cache.attention_pinned_ws.data_ptr());
    grow(std::max<int64_t>(cache.num_blocks, 4 * bmax));
  }

  int64_t off_pos() const { return bmax; }
  int64_t off_slot() const { return 2 * bmax; }
  int64_t off_indptr() const { return 3 * bmax; }
  int64_t off_last() const { return 4 * bmax + 1; }
  int64_t off_indices() const { return 5 * bmax + 1; }

  /// (Re)allocates the metadata buffers for `entries` page indices; graphs baked the old address.
  void grow(int64_t entries) {
    capacity = entries;
    const int64_t n = off_indices() + capacity;
    meta = at::zeros({n}, at::TensorOptions().dtype(at::kInt).device(model.device()));
    meta_h = at::zeros({n}, at::TensorOptions().dtype(at::kInt).pinned_memory(true));
    graphs.clear();
    pool = {0, 0};
  }

  /// The step on the current stream: forward over the paged cache for B rows, then sampling into
  /// the static outputs. Captured as is.
  void body(int64_t B) {
    llm::paged_step st;
    st.ids = meta.narrow(0, 0, B).to(at::kLong);
    st.positions = meta.narrow(0, off_pos(), B).to(at::kLong);
    st.slots = meta.narrow(0, off_slot(), B).to(at::kLong);
    st.kv_indptr = meta.narrow(0, off_indptr(), B + 1);
    st.kv_last = meta.narrow(0, off_last(), B);
    st.kv_indices = meta.narrow(0, off_indices(), capacity);
    st.sequences = B;
    st.decode_only = true;
    st.attention = attention;
    llm::forward_options opt;
    opt.cache = &cache;
    opt.step = &st;
    auto fr = model.forward({}, opt);
    auto next_positions = st.positions + 1;
    auto tok = token.narrow(0, 0, B);
    auto res = result.narrow(0, 0, 2 * B);
    sample_rows_device(model, fr.hidden, temps.narrow(0, 0, B), seeds.narrow(0, 0, B), next_positions,
                       at::Tensor(), tok, res);
    packed.narrow(0, 0, B).copy_(tok);  // ids are exact in float64
    packed.narrow(0, B, 2 * B).copy_(res);
    for (int64_t l = 0; l < moe_layers; ++l)
      packed.narrow(0, 3 * B + l * B * top_k, B * top_k).copy_(fr.experts.at(l).reshape({-1}));
  }
};

decode_graphs::decode_graphs(const llm::decoder& model, llm::kv_cache& cache, int32_t dummy_block,
                             int64_t max_batch, bool use_graphs)
    : buckets_(make_buckets(max_batch)) {
  if (!supported(model, cache)) throw std::invalid_argument("decode graphs: needs a dense model with paged kernels");
  impl_ = std::make_unique<impl>(model, cache, dummy_block, buckets_.back(), use_graphs);
}

decode_graphs::~decode_graphs() = default;

std::vector<device_sample_result> decode_graphs::run(const std::vector<decode_row>& rows) {
  auto& m = *impl_;
  const auto started = std::chrono::steady_clock::now();
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t B = bucket(n);
  if (n == 0 || B == 0) throw std::invalid_argument("decode graphs: " + std::to_string(n) + " rows");
  const auto& c = m.model.config();
  const int64_t bs = m.cache.block_size;
  // Page indices first, to know whether the static buffer holds them.
  int64_t pages = B - n;  // one dummy page per padding row
  for (const auto& r : rows) pages += r.position / bs + 1;
  if (pages > m.capacity) m.grow(2 * pages);
  int32_t* h = m.meta_h.data_ptr<int32_t>();
  int32_t* indptr = h + m.off_indptr();
  int32_t* indices = h + m.off_indices();
  int64_t* seeds = m.seeds_h.data_ptr<int64_t>();
  float* temps = m.temps_h.data_ptr<float>();
  indptr[0] = 0;
  int64_t used = 0;
  for (int64_t i = 0; i < B; ++i) {
    if (i < n) {
      const auto& r = rows[i];
      const int64_t np = r.position / bs + 1;
      if (r.table == nullptr || static_cast<int64_t>(r.table->size()) < np)
        throw std::invalid_argument("decode graphs: row " + std::to_string(i) + "'s block table is too short");
      h[i] = static_cast<int32_t>(r.token);
      h[m.off_pos() + i] = static_cast<int32_t>(r.position);
      h[m.off_slot() + i] = static_cast<int32_t>(int64_t((*r.table)[r.position / bs]) * bs + r.position % bs);
      std::memcpy(indices + used, r.table->data(), np * sizeof(int32_t));
      used += np;
      h[m.off_last() + i] = static_cast<int32_t>(r.position - (np - 1) * bs + 1);
      seeds[i] = static_cast<int64_t>(r.seed);
      temps[i] = static_cast<float>(r.temperature);
    } else {
      h[i] = 0;
      h[m.off_pos() + i] = 0;
      h[m.off_slot() + i] = static_cast<int32_t>(int64_t(m.dummy) * bs);
      indices[used++] = m.dummy;
      h[m.off_last() + i] = 1;
      seeds[i] = 0;
      temps[i] = 1.0f;
    }
    indptr[i + 1] = static_cast<int32_t>(used);
  }
  // The step's work goes on the runner's own stream (graphs are captured on a side stream), after
  // whatever the engine queued on the current one.
  auto previous = at::cuda::getCurrentCUDAStream();
  at::cuda::CUDAEvent ready;
  ready.record(previous);
  ready.block(m.stream);
  c10::cuda::CUDAStreamGuard guard(m.stream);
  m.meta.narrow(0, 0, m.off_indices() + used)
      .copy_(m.meta_h.narrow(0, 0, m.off_indices() + used), /*non_blocking=*/true);
  m.seeds.copy_(m.seeds_h, /*non_blocking=*/true);
  m.temps.copy_(m.temps_h, /*non_blocking=*/true);
  // Planned in CUDA-graph mode in both runs, so that the eager and the replayed step launch the
  // same kernels (the split over the KV depends on B only).
  m.attention->plan_decode(indptr, static_cast<int>(B), static_cast<int>(c.num_heads),
                           static_cast<int>(c.num_kv_heads), static_cast<int>(c.head_dim),
                           static_cast<int>(bs), /*cuda_graph=*/true, m.stream.stream());
  at::cuda::CUDAEvent gpu_start(cudaEventDefault), gpu_end(cudaEventDefault);
  bool timed = true;
  const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (!m.use_graphs) {
    gpu_start.record(m.stream);
    m.body(B);
    gpu_end.record(m.stream);
    stats_.eager++;
  } else {
    const void* params = m.model.params().buffer().data_ptr();
    if (params != m.params_ptr) {  // new weights at a new address: capture again
      m.graphs.clear();
      m.pool = {0, 0};
      m.params_ptr = params;
    }
    auto& g = m.graphs[B];
    if (!g) {
      m.body(B);  // warm-up on this stream: cuBLAS workspace, lazy module loading
      // Every graph shares the first one's memory pool: one step runs at a time, and nothing a
      // graph allocates outlives it (its outputs are copied into the static buffers).
      g = std::make_unique<at::cuda::CUDAGraph>();
      g->capture_begin(m.pool, cudaStreamCaptureModeThreadLocal);
      m.body(B);
      g->capture_end();
      if (m.pool.first == 0 && m.pool.second == 0) m.pool = g->pool();
      stats_.captures++;
      timed = false;
    }
    gpu_start.record(m.stream);
    g->replay();
    gpu_end.record(m.stream);
    stats_.replays++;
  }
  auto host = m.packed.narrow(0, 0, 3 * B + m.moe_layers * B * m.top_k).to(at::kCPU);
  if (timed) {
    stats_.host_ms += host_ms;
    stats_.gpu_ms += gpu_start.elapsed_time(gpu_end);
  }
  const double* v = host.data_ptr<double>();
  std::vector<device_sample_result> out(n);
  for (int64_t i = 0; i < n; ++i) {
    out[i].token = static_cast<int64_t>(v[i]);
    out[i].logprob = static_cast<float>(v[B + i]);
    out[i].entropy = static_cast<float>(v[2 * B + i]);
    for (int64_t l = 0; l < m.moe_layers; ++l)
      for (int64_t j = 0; j < m.top_k; ++j)
        out[i].experts.push_back(static_cast<int64_t>(v[3 * B + (l * B + i) * m.top_k + j]));
  }
  return out;
}

#else  // no libtorch CUDA part

struct decode_graphs::impl {};
decode_graphs::decode_graphs(const llm::decoder&, llm::kv_cache&, int32_t, int64_t, bool) {
  throw std::invalid_argument("decode graphs: built without libtorch's CUDA part");
}
decode_graphs::~decode_graphs() = default;
std::vector<device_sample_result> decode_graphs::run(const std::vector<decode_row>&) {
  throw std::invalid_argument("decode graphs: built without libtorch's CUDA part");
}

#endif

}  // namespace milesrt::serving
