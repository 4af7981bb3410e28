#pragma once

// The workloads memd-tracegen can write. Each is deterministic for its
// options (seed included), stops starting new work once `events` events are
// written, and then frees everything still live, so a trace ends empty.

#include <cstdint>

#include "tools/tracegen/trace_builder.h"

namespace memd::tracegen {

// A transformer training loop (fp16 activations): per iteration a forward
// pass over `layers` layers that keeps activations for the backward pass
// and frees temporaries as it goes, then a backward pass in reverse order
// that frees them, allocating gradients (weight gradients live until the
// optimizer step). Weights, optimizer state and an embedding live for the
// whole run. Every `eval_every` iterations a forward-only evaluation at
// twice the batch; every `epoch_iterations` iterations a smaller last batch
// (its size from the seed). The seed also picks which layers use
// sliding-window attention (smaller attention tensors).
struct TrainingOptions {
  std::uint64_t seed = 1;
  std::uint64_t events = 100000;
  std::uint64_t layers = 24;
  // About a 500M-parameter model: tensors from ~24 KiB (layer norm
  // statistics) over 7.5 MiB (activations) to ~60 MiB (attention scores),
  // mostly not powers of two.
  std::uint64_t batch = 6;
  std::uint64_t sequence = 512;
  std::uint64_t hidden = 1280;
  std::uint64_t heads = 20;
  std::uint64_t vocabulary = 12000;
  std::uint64_t eval_every = 25;
  std::uint64_t epoch_iterations = 40;
};
void GenerateTraining(const TrainingOptions& options, TraceBuilder& trace);

// An LLM inference server with continuous batching. Requests arrive with a
// prompt length (lognormal, median 256 tokens) and an output length
// (lognormal, median 128 tokens); each holds token buffers and a KV cache
// that is reallocated 1.5 times larger when it fills. Every decode round
// allocates and frees batch-sized activations and logits, advances every
// live request by up to 8 tokens, and admits new requests so that their
// number fluctuates around `concurrency`.
struct InferenceOptions {
  std::uint64_t seed = 1;
  std::uint64_t events = 100000;
  std::uint64_t concurrency = 32;
};
void GenerateInference(const InferenceOptions& options, TraceBuilder& trace);

// Random allocations and frees: sizes log-uniform in [min_bytes,
// max_bytes] (any byte count, not rounded), frees of a uniformly chosen live
// allocation, the number of live allocations held around `live`.
struct StressOptions {
  std::uint64_t seed = 1;
  std::uint64_t events = 100000;
  std::uint64_t live = 200;
  std::uint64_t min_bytes = 4096;
  std::uint64_t max_bytes = 256 << 20;
};
void GenerateStress(const StressOptions& options, TraceBuilder& trace);

}  // namespace memd::tracegen
