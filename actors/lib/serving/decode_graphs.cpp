#include "actors/lib/serving/decode_graphs.hpp"

#include <ATen/ATen.h>

#include <chrono>
#include <cstring>
#include <map>
#include <stdexcept>

#include "kernels/attention/paged_attention.hpp"
#include "runtime/core/timer.hpp"

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
  // In the true on-policy mode a mixture of experts runs expert by expert, which reads the
  // routing on the host: not capturable, so its decode steps run eagerly.
  if (model.batch_invariant() && model.config().num_experts > 0) return false;
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
  // (capacity); int64 seeds; float temperatures. Outputs: int64 tokens, float log-probs |
  // entropies.
  at::Tensor meta, seeds, temps, token, result;
  // float64 [3 bmax + moe_layers bmax k]: a step's tokens | log-probs | entropies | MoE routing
  // (per MoE layer, each row's top-k experts), read back in one copy.
  at::Tensor packed;
  int64_t moe_layers = 0, top_k = 0;
  // Page-locked staging, two sets: one may still be copying (or hold the step staged ahead) while
  // the other is written. `copied` is recorded after a set's copies were queued.
  struct staging {
    at::Tensor meta_h, seeds_h, temps_h;
    at::cuda::CUDAEvent copied;
  };
  staging sets[2];
  int next_set = 0;
  at::cuda::CUDAEvent planned;  // after the last plan's copy out of FlashInfer's pinned workspace
  at::Tensor out_h;             // page-locked: a step's packed results
  // The step staged ahead (run's `next`): what it was staged for, to compare with the rows asked.
  struct ahead_t {
    bool valid = false;
    std::vector<decode_row> rows;
    std::vector<std::vector<int32_t>> pages;  // each row's pages as staged
  } ahead;
  std::vector<int64_t> last_tokens;  // the last step's samples, by row
  std::shared_ptr<kernels::paged_attention> attention;
  std::map<int64_t, std::unique_ptr<at::cuda::CUDAGraph>> graphs;
  c10::MempoolId_t pool{0, 0};
  const void* params_ptr = nullptr;
  at::cuda::CUDAStream stream;

  impl(const llm::decoder& m, llm::kv_cache& c, int32_t d, int64_t b, bool g)
      : model(m),
        cache(c),
        dummy(d),
        bmax(b),
        use_graphs(g),
        stream(at::cuda::getStreamFromPool(
            false,
            static_cast<c10::DeviceIndex>(m.device().index() < 0 ? 0 : m.device().index()))) {
    const auto dev = m.device();
    seeds = at::zeros({bmax}, at::TensorOptions().dtype(at::kLong).device(dev));
    temps = at::ones({bmax}, at::TensorOptions().dtype(at::kFloat).device(dev));
    token = at::zeros({bmax}, at::TensorOptions().dtype(at::kLong).device(dev));
    result = at::zeros({2 * bmax}, at::TensorOptions().dtype(at::kFloat).device(dev));
    for (int64_t l = 0; l < m.config().num_layers; ++l)
      moe_layers += m.config().is_moe_layer(l) ? 1 : 0;
    top_k = moe_layers > 0 ? m.config().num_experts_per_tok : 0;
    packed = at::zeros({3 * bmax + moe_layers * bmax * top_k},
                       at::TensorOptions().dtype(at::kDouble).device(dev));
    for (auto& set : sets) {
      set.seeds_h = at::empty({bmax}, at::TensorOptions().dtype(at::kLong).pinned_memory(true));
      set.temps_h = at::empty({bmax}, at::TensorOptions().dtype(at::kFloat).pinned_memory(true));
    }
    out_h = at::empty({packed.numel()}, at::TensorOptions().dtype(at::kDouble).pinned_memory(true));
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
    for (auto& set : sets) set.copied.synchronize();
    capacity = entries;
    const int64_t n = off_indices() + capacity;
    meta = at::zeros({n}, at::TensorOptions().dtype(at::kInt).device(model.device()));
    for (auto& set : sets)
      set.meta_h = at::zeros({n}, at::TensorOptions().dtype(at::kInt).pinned_memory(true));
    graphs.clear();
    pool = {0, 0};
    ahead.valid = false;  // staged into the old buffer
  }

  /// Page indices a step of `rows` in bucket B needs (padding rows take one each).
  int64_t pages_of(const std::vector<decode_row>& rows, int64_t B) const {
    int64_t pages = B - static_cast<int64_t>(rows.size());
    for (const auto& r : rows) pages += r.position / cache.block_size + 1;
    return pages;
  }

  /// Writes the step's inputs into a staging set and queues their copies to the device, then
  /// FlashInfer's plan, on `stream` (behind whatever runs there). Rows with `from` >= 0 take their
  /// input token from the previous step's samples (gathered on the device). Returns the set.
  staging& stage(const std::vector<decode_row>& rows, int64_t B,
                 const at::cuda::CUDAStream& stream) {
    const auto& c = model.config();
    const int64_t n = static_cast<int64_t>(rows.size());
    const int64_t bs = cache.block_size;
    auto& set = sets[next_set];
    next_set ^= 1;
    set.copied.synchronize();  // its previous copies have left the host buffers
    int32_t* h = set.meta_h.data_ptr<int32_t>();
    int32_t* indptr = h + off_indptr();
    int32_t* indices = h + off_indices();
    int64_t* seeds_p = set.seeds_h.data_ptr<int64_t>();
    float* temps_p = set.temps_h.data_ptr<float>();
    bool gather = false;
    indptr[0] = 0;
    int64_t used = 0;
    for (int64_t i = 0; i < B; ++i) {
      if (i < n) {
        const auto& r = rows[i];
        const int64_t np = r.position / bs + 1;
        if (r.table == nullptr || static_cast<int64_t>(r.table->size()) < np)
          throw std::invalid_argument("decode graphs: row " + std::to_string(i) +
                                      "'s block table is too short");
        gather = gather || r.from >= 0;
        h[i] = static_cast<int32_t>(r.from >= 0 ? r.from : r.token);
        h[off_pos() + i] = static_cast<int32_t>(r.position);
        h[off_slot() + i] =
            static_cast<int32_t>(int64_t((*r.table)[r.position / bs]) * bs + r.position % bs);
        std::memcpy(indices + used, r.table->data(), np * sizeof(int32_t));
        used += np;
        h[off_last() + i] = static_cast<int32_t>(r.position - (np - 1) * bs + 1);
        seeds_p[i] = static_cast<int64_t>(r.seed);
        temps_p[i] = static_cast<float>(r.temperature);
      } else {
        h[i] = 0;
        h[off_pos() + i] = 0;
        h[off_slot() + i] = static_cast<int32_t>(int64_t(dummy) * bs);
        indices[used++] = dummy;
        h[off_last() + i] = 1;
        seeds_p[i] = 0;
        temps_p[i] = 1.0f;
      }
      indptr[i + 1] = static_cast<int32_t>(used);
    }
    meta.narrow(0, 0, off_indices() + used)
        .copy_(set.meta_h.narrow(0, 0, off_indices() + used), /*non_blocking=*/true);
    seeds.copy_(set.seeds_h, /*non_blocking=*/true);
    temps.copy_(set.temps_h, /*non_blocking=*/true);
    set.copied.record(stream);
    if (gather) {
      // The input tokens are the samples of the step before, by row (the ids section holds rows).
      auto ids = meta.narrow(0, 0, B);
      ids.copy_(token.index_select(0, ids.to(at::kLong)));
    }
    // Planned in CUDA-graph mode in both runs, so that the eager and the replayed step launch the
    // same kernels (the split over the KV depends on B only).
    planned.synchronize();  // the last plan's copy has left FlashInfer's pinned workspace
    attention->plan_decode(indptr, static_cast<int>(B), static_cast<int>(c.num_heads),
                           static_cast<int>(c.num_kv_heads), static_cast<int>(c.head_dim),
                           static_cast<int>(bs), /*cuda_graph=*/true, stream.stream());
    planned.record(stream);
    return set;
  }

  /// Whether `rows` are exactly the rows staged ahead, fed the tokens the last step sampled.
  bool ahead_matches(const std::vector<decode_row>& rows) const {
    if (!ahead.valid || rows.size() != ahead.rows.size()) return false;
    for (size_t j = 0; j < rows.size(); ++j) {
      const auto& a = ahead.rows[j];
      const auto& r = rows[j];
      if (r.position != a.position || r.seed != a.seed || r.temperature != a.temperature ||
          r.table != a.table)
        return false;
      if (a.from < 0 || a.from >= static_cast<int64_t>(last_tokens.size()) ||
          r.token != last_tokens[a.from])
        return false;
      const auto& pages = ahead.pages[j];
      if (r.table->size() < pages.size() ||
          !std::equal(pages.begin(), pages.end(), r.table->begin()))
        return false;
    }
    return true;
  }

  /// The step on the current stream: forward over the paged cache for B rows, then sampling into
  /// the static outputs. Captured as is.
  void body(int64_t B) {
    llm::paged_step st;
    st.ids = meta.narrow(0, 0, B).to(at::kLong);
    st.positions32 = meta.narrow(0, off_pos(), B);
    st.positions = st.positions32.to(at::kLong);
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
    sample_rows_device(model, fr.hidden, temps.narrow(0, 0, B), seeds.narrow(0, 0, B),
                       next_positions, at::Tensor(), tok, res);
    packed.narrow(0, 0, B).copy_(tok);  // ids are exact in float64
    packed.narrow(0, B, 2 * B).copy_(res);
    for (int64_t l = 0; l < moe_layers; ++l)
      packed.narrow(0, 3 * B + l * B * top_k, B * top_k).copy_(fr.experts.at(l).reshape({-1}));
  }

  /// The graph of bucket B, captured first when there is none (or the parameters moved); returns
  /// whether it captured.
  bool ensure_graph(int64_t B) {
    const void* params = model.published().buffer().data_ptr();
    if (params != params_ptr) {  // new weights at a new address: capture again
      graphs.clear();
      pool = {0, 0};
      params_ptr = params;
    }
    auto& g = graphs[B];
    if (g) return false;
    body(B);  // warm-up on this stream: cuBLAS workspace, lazy module loading
    // Every graph shares the first one's memory pool: one step runs at a time, and nothing a
    // graph allocates outlives it (its outputs are copied into the static buffers).
    g = std::make_unique<at::cuda::CUDAGraph>();
    g->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
    try {
      body(B);
    } catch (...) {  // end the capture, or the stream stays capturing after the error
      try {
        g->capture_end();
      } catch (...) {
      }
      g.reset();
      throw;
    }
    g->capture_end();
    if (pool.first == 0 && pool.second == 0) pool = g->pool();
    return true;
  }

  /// Stages `next` (in bucket B2, each row fed from one of this step's n rows) behind the step
  /// that runs, when it fits; returns whether it did.
  bool stage_ahead(const std::vector<decode_row>& next, int64_t B2, int64_t n) {
    bool ok = B2 > 0 && pages_of(next, B2) <= capacity;
    for (const auto& r : next) {
      ok = ok && r.from >= 0 && r.from < n && r.table != nullptr &&
           static_cast<int64_t>(r.table->size()) > r.position / cache.block_size;
    }
    if (!ok) return false;
    stage(next, B2, stream);
    ahead.rows = next;
    ahead.pages.clear();
    for (const auto& r : next) {
      const int64_t np = r.position / cache.block_size + 1;
      ahead.pages.emplace_back(r.table->begin(), r.table->begin() + np);
    }
    ahead.valid = true;
    return true;
  }

  /// The n rows' samples of a step in bucket B, from the packed results on the host.
  std::vector<device_sample_result> results(int64_t n, int64_t B) {
    const double* v = out_h.data_ptr<double>();
    std::vector<device_sample_result> out(n);
    last_tokens.assign(n, 0);
    for (int64_t i = 0; i < n; ++i) {
      out[i].token = static_cast<int64_t>(v[i]);
      last_tokens[i] = out[i].token;
      out[i].logprob = static_cast<float>(v[B + i]);
      out[i].entropy = static_cast<float>(v[2 * B + i]);
      for (int64_t l = 0; l < moe_layers; ++l)
        for (int64_t j = 0; j < top_k; ++j)
          out[i].experts.push_back(static_cast<int64_t>(v[3 * B + (l * B + i) * top_k + j]));
    }
    return out;
  }
};

decode_graphs::decode_graphs(const llm::decoder& model, llm::kv_cache& cache, int32_t dummy_block,
                             int64_t max_batch, bool use_graphs)
    : buckets_(make_buckets(max_batch)) {
  if (!supported(model, cache))
    throw std::invalid_argument("decode graphs: needs a dense model with paged kernels");
  impl_ = std::make_unique<impl>(model, cache, dummy_block, buckets_.back(), use_graphs);
}

decode_graphs::~decode_graphs() = default;

std::vector<device_sample_result> decode_graphs::run(const std::vector<decode_row>& rows,
                                                     const std::vector<decode_row>* next) {
  auto& m = *impl_;
  const timer started;
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t B = bucket(n);
  if (n == 0 || B == 0)
    throw std::invalid_argument("decode graphs: " + std::to_string(n) + " rows");
  // The step's work goes on the runner's own stream (graphs are captured on a side stream), after
  // whatever the engine queued on the current one.
  auto previous = at::cuda::getCurrentCUDAStream();
  at::cuda::CUDAEvent ready;
  ready.record(previous);
  ready.block(m.stream);
  c10::cuda::CUDAStreamGuard guard(m.stream);
  if (m.ahead_matches(rows)) {
    stats_.staged_ahead_used++;  // its inputs and plan are queued already
  } else {
    if (const int64_t pages = m.pages_of(rows, B); pages > m.capacity) m.grow(2 * pages);
    m.stage(rows, B, m.stream);
  }
  m.ahead.valid = false;
  at::cuda::CUDAEvent gpu_start(cudaEventDefault), gpu_end(cudaEventDefault);
  bool timed = true;
  const double host_ms = started.milliseconds();
  if (!m.use_graphs) {
    gpu_start.record(m.stream);
    m.body(B);
    gpu_end.record(m.stream);
    stats_.eager++;
  } else {
    if (m.ensure_graph(B)) {
      stats_.captures++;
      timed = false;
    }
    gpu_start.record(m.stream);
    m.graphs[B]->replay();
    gpu_end.record(m.stream);
    stats_.replays++;
  }
  const int64_t out_n = 3 * B + m.moe_layers * B * m.top_k;
  m.out_h.narrow(0, 0, out_n).copy_(m.packed.narrow(0, 0, out_n), /*non_blocking=*/true);
  at::cuda::CUDAEvent done;
  done.record(m.stream);
  // While the GPU runs this step: stage the one expected next behind it.
  if (next != nullptr && !next->empty() && m.stage_ahead(*next, bucket(int64_t(next->size())), n))
    stats_.staged_ahead++;
  done.synchronize();
  if (timed) {
    stats_.host_ms += host_ms;
    stats_.gpu_ms += gpu_start.elapsed_time(gpu_end);
  }
  return m.results(n, B);
}

#else  // no libtorch CUDA part

struct decode_graphs::impl {};
decode_graphs::decode_graphs(const llm::decoder&, llm::kv_cache&, int32_t, int64_t, bool) {
  throw std::invalid_argument("decode graphs: built without libtorch's CUDA part");
}
decode_graphs::~decode_graphs() = default;
std::vector<device_sample_result> decode_graphs::run(const std::vector<decode_row>&,
                                                     const std::vector<decode_row>*) {
  throw std::invalid_argument("decode graphs: built without libtorch's CUDA part");
}

#endif

}  // namespace milesrt::serving
