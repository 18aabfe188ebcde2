// Paged-KV argument parsing shared by the attention bindings (attention-napi.cc,
// window-ops-napi.cc); defined in attention-napi.cc. Same contract as
// napi-args.h: false means a KVT_ERR_NATIVE_* error is already thrown.
#pragma once
#include <napi.h>

#include <string>
#include <vector>

#include "kernels.h"
#include "napi-args.h"

namespace kvt {

// KV args at [i..i+4]: pages, layers, kvHeads, headDim, kvDtype; n_pages = whole pages in the pool (> 0).
bool get_kv(const Napi::CallbackInfo& info, size_t i, Bytes* pages, KvLayout* kv, size_t* n_pages);

// segs holds [tableOffset, tableLen, pos0, nQueries] per segment into tables; checks each range and
// block table against the pool and gives rows = Σ nQueries (the segments' query rows are consecutive).
bool get_segments(Napi::Env env, const std::string& op, int32_t* tables, size_t n_tables, const int32_t* segs,
                  size_t n_segs4, size_t n_pages, std::vector<AttnSegment>* sg, int* rows);

}  // namespace kvt
