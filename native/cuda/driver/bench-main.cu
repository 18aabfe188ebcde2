// kvtier_cuda_bench — prefill/decode throughput of a ~1B llama (F16, random
// weights generated on the device) and the tier path: importing 32k cached
// tokens (512 blocks) from pinned memory vs prefilling them.
//
//   kvtier_cuda_bench [--device N] [--small]
//
// stdout: one JSON object; progress on stderr. Exit 77 when no CUDA device.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "../cuda-backend.h"

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Bench {
  kvt_cuda_ctx* ctx = nullptr;
  kvt_cuda_model* model = nullptr;
  kvt_llama_config cfg{};
  std::string out;
  void put(const char* k, double v) {
    char b[96];
    std::snprintf(b, sizeof b, "%s\"%s\":%.6g", out.empty() ? "" : ",", k, v);
    out += b;
  }
  void put(const char* k, const std::string& v) {
    out += std::string(out.empty() ? "" : ",") + "\"" + k + "\":\"" + v + "\"";
  }
};

[[noreturn]] void die(Bench& b, const char* what) {
  std::fprintf(stderr, "bench failed at %s: %s\n", what, kvt_cuda_last_error(b.ctx));
  std::printf("{\"error\":\"%s\"}\n", what);
  std::exit(1);
}
#define OK(expr, what) do { if ((expr) != KVT_CUDA_OK) die(b, what); } while (0)

}  // namespace

int main(int argc, char** argv) {
  int device = 0;
  bool small = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--small")) small = true;
  }
  char reason[256] = {0};
  if (kvt_cuda_device_count(reason, sizeof reason) == 0) {
    std::fprintf(stderr, "SKIP bench: %s\n", reason);
    std::printf("{\"skipped\":\"%s\"}\n", reason);
    return 77;
  }
  Bench b;
  char err[256];
  if (kvt_cuda_create(device, &b.ctx, err, sizeof err) != KVT_CUDA_OK) {
    std::fprintf(stderr, "%s\n", err);
    return 1;
  }
  char name[128];
  int sms = 0, cc = 0;
  size_t mem = 0;
  kvt_cuda_device_info(b.ctx, name, sizeof name, &sms, &mem, &cc);
  b.put("device", std::string(name));
  b.put("cc", cc);

  kvt_llama_config& c = b.cfg;
  c = {32000, 2048, 16, 32, 8, 64, 5632, 1e-5f, 10000.f, KVT_ROPE_NORMAL};
  if (small) c = {32000, 1024, 4, 16, 4, 64, 2816, 1e-5f, 10000.f, KVT_ROPE_NORMAL};
  const int cached_blocks = small ? 64 : 512;  // 32k tokens
  const int n_pages = 2 * cached_blocks + 8;
  OK(kvt_cuda_kv_pool_create(b.ctx, c.n_layer, c.n_kv_head, c.head_dim, n_pages), "kv pool");
  OK(kvt_cuda_model_create(b.ctx, &c, &b.model), "model");
  {
    const double t0 = now_ms();
    const int d = c.d_model, qd = c.n_head * c.head_dim, kvd = c.n_kv_head * c.head_dim;
    const float sd = 1.f / std::sqrt((float)d), sf = 1.f / std::sqrt((float)c.d_ffn);
    uint64_t seed = 1;
    auto rnd = [&](const std::string& n, int rows, int cols, float scale) {
      int32_t id;
      OK(kvt_cuda_weight_random(b.ctx, KVT_F16, rows, cols, seed++, scale, &id), "weights");
      OK(kvt_cuda_model_bind(b.model, n.c_str(), id), "bind");
    };
    auto one = [&](const std::string& n) {
      int32_t id;
      OK(kvt_cuda_weight_const(b.ctx, d, 1.f, &id), "norms");
      OK(kvt_cuda_model_bind(b.model, n.c_str(), id), "bind");
    };
    rnd("token_embd.weight", c.n_vocab, d, 1.f);
    rnd("output.weight", c.n_vocab, d, sd);
    one("output_norm.weight");
    for (int l = 0; l < c.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      one(p + "attn_norm.weight");
      one(p + "ffn_norm.weight");
      rnd(p + "attn_q.weight", qd, d, sd);
      rnd(p + "attn_k.weight", kvd, d, sd);
      rnd(p + "attn_v.weight", kvd, d, sd);
      rnd(p + "attn_output.weight", d, qd, 1.f / std::sqrt((float)qd));
      rnd(p + "ffn_gate.weight", c.d_ffn, d, sd);
      rnd(p + "ffn_up.weight", c.d_ffn, d, sd);
      rnd(p + "ffn_down.weight", d, c.d_ffn, sf);
    }
    b.put("weight_bytes", (double)kvt_cuda_weight_bytes(b.ctx));
    b.put("params", (double)kvt_cuda_weight_bytes(b.ctx) / 2);
    b.put("weights_generate_ms", now_ms() - t0);
  }
  std::fprintf(stderr, "model ready: %.2f GB of F16 weights\n", kvt_cuda_weight_bytes(b.ctx) / 1e9);

  const size_t page_bytes = kvt_cuda_kv_page_bytes(b.ctx);
  // Pages [0, cached_blocks) hold the "cached" prefix; [cached_blocks, 2*cached_blocks) the recomputed one.
  std::vector<int32_t> cached_pages(cached_blocks), fresh_pages(cached_blocks + 1);
  std::iota(cached_pages.begin(), cached_pages.end(), 0);
  std::iota(fresh_pages.begin(), fresh_pages.end(), cached_blocks);
  std::vector<int32_t> tokens(cached_blocks * 64 + 64);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = (int32_t)((i * 2654435761u) % c.n_vocab);

  // Prefill throughput.
  int32_t next = 0;
  for (int t : {512, 2048}) {
    OK(kvt_cuda_forward(b.model, tokens.data(), t, 0, fresh_pages.data(), (t + 63) / 64, nullptr, &next, 0), "warmup");
    double best = 1e300;
    for (int rep = 0; rep < 3; ++rep) {
      const double t0 = now_ms();
      OK(kvt_cuda_forward(b.model, tokens.data(), t, 0, fresh_pages.data(), (t + 63) / 64, nullptr, &next, 0), "prefill");
      best = std::min(best, now_ms() - t0);
    }
    b.put(("prefill_" + std::to_string(t) + "_tok_s").c_str(), t / best * 1e3);
    std::fprintf(stderr, "prefill %d tokens: %.1f ms\n", t, best);
  }

  // Decode throughput after a 512-token prompt.
  auto decode = [&](int steps, int pos) {
    const double t0 = now_ms();
    for (int i = 0; i < steps; ++i) {
      int32_t tok = next;
      OK(kvt_cuda_forward(b.model, &tok, 1, pos + i, fresh_pages.data(), (pos + steps + 63) / 64, nullptr, &next, 0),
         "decode");
    }
    return now_ms() - t0;
  };
  OK(kvt_cuda_forward(b.model, tokens.data(), 512, 0, fresh_pages.data(), 9, nullptr, &next, 0), "prompt");
  decode(8, 512);
  const double dec_ms = decode(128, 520);
  b.put("decode_tok_s", 128 / dec_ms * 1e3);
  std::fprintf(stderr, "decode: %.2f ms/token\n", dec_ms / 128);

  // Tier path: import 32k cached tokens from pinned memory vs prefilling them.
  void* pinned = nullptr;
  OK(kvt_cuda_host_alloc(b.ctx, page_bytes * cached_blocks, &pinned), "pinned staging");
  std::memset(pinned, 0x11, page_bytes * cached_blocks);  // small f16 values, finite
  double import_ms = 1e300;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = now_ms();
    OK(kvt_cuda_kv_import(b.ctx, cached_pages.data(), cached_blocks, pinned, page_bytes), "import");
    OK(kvt_cuda_kv_import_wait(b.ctx), "import wait");
    import_ms = std::min(import_ms, now_ms() - t0);
  }
  const int cached_tokens = cached_blocks * 64;
  b.put("cached_tokens", cached_tokens);
  b.put("import_ms", import_ms);
  b.put("import_GB_s", page_bytes * (double)cached_blocks / import_ms / 1e6);
  std::fprintf(stderr, "import %d blocks: %.1f ms\n", cached_blocks, import_ms);

  const int chunk = 4096;
  const double p0 = now_ms();
  for (int pos = 0; pos < cached_tokens; pos += chunk) {
    const int t = std::min(chunk, cached_tokens - pos);
    OK(kvt_cuda_forward(b.model, tokens.data() + pos, t, pos, fresh_pages.data(), (pos + t + 63) / 64, nullptr,
                        nullptr, 0),
       "prefill 32k");
  }
  const double prefill_ms = now_ms() - p0;
  b.put("prefill_cached_tokens_ms", prefill_ms);
  b.put("prefill_over_import", prefill_ms / import_ms);
  std::fprintf(stderr, "prefill %d tokens (chunks of %d): %.1f ms\n", cached_tokens, chunk, prefill_ms);

  // Overlap: import + 64-token suffix prefill, against the suffix alone on resident pages.
  std::vector<int32_t> table(cached_pages);
  table.push_back(2 * cached_blocks);
  const int suffix = 64;
  auto suffix_forward = [&]() {
    OK(kvt_cuda_forward(b.model, tokens.data() + cached_tokens, suffix, cached_tokens, table.data(),
                        (int)table.size(), nullptr, &next, 0),
       "suffix");
  };
  suffix_forward();
  double t0 = now_ms();
  suffix_forward();
  const double suffix_ms = now_ms() - t0;
  t0 = now_ms();
  OK(kvt_cuda_kv_import(b.ctx, cached_pages.data(), cached_blocks, pinned, page_bytes), "import");
  suffix_forward();
  OK(kvt_cuda_kv_import_wait(b.ctx), "import wait");
  const double overlapped_ms = now_ms() - t0;
  b.put("suffix_prefill_ms", suffix_ms);
  b.put("import_plus_suffix_ms", overlapped_ms);
  b.put("overlap_saved_ms", import_ms + suffix_ms - overlapped_ms);

  // Export of the whole cached prefix while decoding: decode must not stall.
  OK(kvt_cuda_forward(b.model, tokens.data(), 64, 0, fresh_pages.data(), 2, nullptr, &next, 0), "prompt");
  const double alone_ms = decode(64, 64);
  uint64_t ticket;
  t0 = now_ms();
  OK(kvt_cuda_kv_export(b.ctx, cached_pages.data(), cached_blocks, pinned, page_bytes, &ticket), "export");
  const double during_ms = decode(64, 64);
  int polled_done_during_decode = kvt_cuda_kv_export_poll(b.ctx, ticket);
  if (polled_done_during_decode == 0) OK(kvt_cuda_kv_export_wait(b.ctx, ticket), "export wait");
  const double export_ms = now_ms() - t0;
  b.put("decode_tok_s_alone", 64 / alone_ms * 1e3);
  b.put("decode_tok_s_during_export", 64 / during_ms * 1e3);
  b.put("decode_during_export_ratio", alone_ms / during_ms);
  b.put("export_ms_with_decode", export_ms);

  kvt_cuda_host_free(b.ctx, pinned);
  kvt_cuda_model_destroy(b.model);
  kvt_cuda_destroy(b.ctx);
  std::printf("{%s}\n", b.out.c_str());
  return 0;
}
