// The inference workload (workloads.h): a small LLM served with continuous
// batching and a contiguous, growing KV cache per request.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tools/tracegen/random.h"
#include "tools/tracegen/workloads.h"

namespace memd::tracegen {
namespace {

constexpr std::uint64_t kHidden = 2048;
constexpr std::uint64_t kVocabulary = 32000;
// 16 layers x (K and V) x 4 KV heads x 64 dimensions x fp16.
constexpr std::uint64_t kKvBytesPerToken = 16 * 2 * 4 * 64 * 2;
constexpr std::uint64_t kKvGranularity = 64;  // Tokens.
constexpr std::uint64_t kMaxTokensPerRound = 8;
// Admission probability per trial is (2 * concurrency - live) / 288 with
// 8 trials a round: about concurrency / 36 arrivals a round at the target,
// which Little's law matches to ~36 rounds a request (mean output ~163
// tokens at ~4.5 a round), and more below it, fewer above.
constexpr std::uint64_t kAdmissionTrials = 8;
constexpr std::uint64_t kAdmissionDenominator = 288;

struct Request {
  std::uint64_t prompt = 0;     // Tokens.
  std::uint64_t output = 0;     // Tokens to generate.
  std::uint64_t generated = 0;
  std::uint64_t kv_tokens = 0;  // KV cache capacity.
  std::uint64_t ids = 0;        // Trace ids of its buffers.
  std::uint64_t kv = 0;
};

class Server {
 public:
  Server(const InferenceOptions& options, TraceBuilder& trace)
      : options_(options), trace_(trace), random_(options.seed) {}

  void Run() {
    while (trace_.events() < options_.events) {
      Admit();
      Decode();
    }
    for (const Request& request : live_) Finish(request);
  }

 private:
  void Admit() {
    const std::uint64_t target = 2 * options_.concurrency;
    const std::uint64_t chance = target > live_.size() ? target - live_.size() : 0;
    for (std::uint64_t trial = 0; trial < kAdmissionTrials; ++trial) {
      if (!random_.Chance(std::min(chance, kAdmissionDenominator), kAdmissionDenominator)) {
        continue;
      }
      Request request;
      request.prompt = random_.LogNormal(256, 1500, 16, 8192);
      request.output = random_.LogNormal(128, 1000, 1, 4096);
      request.ids = trace_.Allocate(request.prompt * 4);
      // Prefill: the whole prompt's activations at once, gone after it.
      const std::uint64_t hidden = trace_.Allocate(request.prompt * kHidden * 2);
      const std::uint64_t mlp = trace_.Allocate(request.prompt * kHidden * 2 * 4);
      request.kv_tokens = RoundUp(request.prompt + kKvGranularity, kKvGranularity);
      request.kv = trace_.Allocate(request.kv_tokens * kKvBytesPerToken);
      trace_.Free(mlp);
      trace_.Free(hidden);
      live_.push_back(request);
    }
  }

  void Decode() {
    if (live_.empty()) return;
    const std::uint64_t batch = live_.size();
    const std::uint64_t hidden = trace_.Allocate(batch * kHidden * 2);
    const std::uint64_t logits = trace_.Allocate(batch * kVocabulary * 4);
    trace_.Free(hidden);
    trace_.Free(logits);
    for (Request& request : live_) {
      request.generated += random_.Between(1, kMaxTokensPerRound);
      if (request.prompt + request.generated > request.kv_tokens) {
        // Grow by half: allocate the new cache, copy, free the old one.
        request.kv_tokens = RoundUp(request.kv_tokens * 3 / 2, kKvGranularity);
        const std::uint64_t grown = trace_.Allocate(request.kv_tokens * kKvBytesPerToken);
        trace_.Free(request.kv);
        request.kv = grown;
      }
    }
    auto done = std::stable_partition(live_.begin(), live_.end(), [](const Request& r) {
      return r.generated < r.output;
    });
    for (auto it = done; it != live_.end(); ++it) Finish(*it);
    live_.erase(done, live_.end());
  }

  void Finish(const Request& request) {
    trace_.Free(request.kv);
    trace_.Free(request.ids);
  }

  const InferenceOptions& options_;
  TraceBuilder& trace_;
  Random random_;
  std::vector<Request> live_;
};

}  // namespace

void GenerateInference(const InferenceOptions& options, TraceBuilder& trace) {
  Server(options, trace).Run();
}

}  // namespace memd::tracegen
