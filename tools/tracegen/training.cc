// The training workload (workloads.h): shapes follow a GPT-style decoder
// layer in fp16, so sizes repeat exactly from one iteration to the next.

#include <cstdint>
#include <utility>
#include <vector>

#include "tools/tracegen/random.h"
#include "tools/tracegen/workloads.h"

namespace memd::tracegen {
namespace {

constexpr std::uint64_t kHalf = 2;   // Bytes per fp16 element.
constexpr std::uint64_t kFloat = 4;  // Bytes per fp32 element.

// An op's output; `saved` ones stay for the backward pass, the others die
// as soon as the next op has consumed them.
struct Tensor {
  std::uint64_t bytes = 0;
  bool saved = true;
};

struct Shapes {
  std::uint64_t tokens;       // batch * sequence
  std::uint64_t activation;   // tokens * hidden, fp16
  std::uint64_t scores;       // batch * heads * sequence * window, fp16
};

Shapes ShapesOf(const TrainingOptions& options, std::uint64_t batch, bool local) {
  // Sliding-window layers attend to a quarter of the sequence.
  const std::uint64_t window = local ? options.sequence / 4 : options.sequence;
  const std::uint64_t tokens = batch * options.sequence;
  return {tokens, tokens * options.hidden * kHalf,
          batch * options.heads * options.sequence * window * kHalf};
}

std::vector<Tensor> LayerForward(const Shapes& s, std::uint64_t hidden) {
  return {
      {s.tokens * 2 * kFloat, true},    // layer norm 1: mean and rstd
      {s.activation, true},             // layer norm 1 output
      {3 * s.activation, true},         // q, k, v
      {s.scores, false},                // raw attention scores
      {s.scores, true},                 // softmax probabilities
      {s.scores / kHalf, true},         // attention dropout mask (1 byte each)
      {s.activation, true},             // attention context
      {s.activation, false},            // output projection
      {s.activation, true},             // residual
      {s.tokens * 2 * kFloat, true},    // layer norm 2: mean and rstd
      {s.activation, true},             // layer norm 2 output
      {4 * s.activation, true},         // fc1
      {4 * s.activation, true},         // gelu
      {s.tokens * hidden, true},        // dropout mask
      {s.activation, true},             // residual: the layer's output
  };
}

std::vector<std::uint64_t> LayerWeights(std::uint64_t hidden) {
  return {2 * hidden * kHalf,             // layer norm 1
          3 * hidden * hidden * kHalf,    // qkv
          hidden * hidden * kHalf,        // output projection
          4 * hidden * hidden * kHalf,    // fc1
          4 * hidden * hidden * kHalf,    // fc2
          2 * hidden * kHalf};            // layer norm 2
}

class Trainer {
 public:
  Trainer(const TrainingOptions& options, TraceBuilder& trace)
      : options_(options), trace_(trace), random_(options.seed) {
    for (std::uint64_t layer = 0; layer < options.layers; ++layer) {
      local_.push_back(random_.Chance(1, 2));
    }
    last_batch_ = options.batch > 1 ? random_.Between(1, options.batch - 1) : 1;
    weight_sizes_.push_back(options.vocabulary * options.hidden * kHalf);  // embedding
    for (std::uint64_t layer = 0; layer < options.layers; ++layer) {
      for (std::uint64_t bytes : LayerWeights(options.hidden)) weight_sizes_.push_back(bytes);
    }
    weight_sizes_.push_back(2 * options.hidden * kHalf);  // final layer norm
  }

  void Run() {
    for (std::uint64_t bytes : weight_sizes_) persistent_.push_back(trace_.Allocate(bytes));
    for (std::uint64_t iteration = 1; trace_.events() < options_.events; ++iteration) {
      const bool last_of_epoch = iteration % options_.epoch_iterations == 0;
      TrainStep(last_of_epoch ? last_batch_ : options_.batch);
      if (iteration % options_.eval_every == 0) Evaluate(2 * options_.batch);
    }
    for (std::uint64_t id : persistent_) trace_.Free(id);
  }

 private:
  void TrainStep(std::uint64_t batch) {
    // Forward: keep what backward needs.
    std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> saved(options_.layers);
    const Shapes embed = ShapesOf(options_, batch, false);
    const std::uint64_t embedded = trace_.Allocate(embed.activation);
    for (std::uint64_t layer = 0; layer < options_.layers; ++layer) {
      std::uint64_t pending = 0;  // A transient output waiting for its consumer.
      for (const Tensor& tensor :
           LayerForward(ShapesOf(options_, batch, local_[layer]), options_.hidden)) {
        const std::uint64_t id = trace_.Allocate(tensor.bytes);
        if (pending != 0) trace_.Free(std::exchange(pending, 0));
        if (tensor.saved) {
          saved[layer].push_back({id, tensor.bytes});
        } else {
          pending = id;
        }
      }
    }
    const std::uint64_t logits_bytes = embed.tokens * options_.vocabulary * kHalf;
    const std::uint64_t logits = trace_.Allocate(logits_bytes);
    const std::uint64_t loss_scratch = trace_.Allocate(embed.tokens * kFloat);
    const std::uint64_t loss = trace_.Allocate(kFloat);
    trace_.Free(loss_scratch);

    // Backward: gradients flow down; each layer's saved tensors die with it.
    std::uint64_t gradient = trace_.Allocate(logits_bytes);
    trace_.Free(logits);
    trace_.Free(loss);
    std::vector<std::uint64_t> weight_gradients;
    const std::vector<std::uint64_t> layer_weights = LayerWeights(options_.hidden);
    for (std::uint64_t layer = options_.layers; layer-- > 0;) {
      for (std::uint64_t bytes : layer_weights) {
        weight_gradients.push_back(trace_.Allocate(bytes));
      }
      for (auto it = saved[layer].rbegin(); it != saved[layer].rend(); ++it) {
        const std::uint64_t next = trace_.Allocate(it->second);
        trace_.Free(gradient);
        trace_.Free(it->first);
        gradient = next;
      }
    }
    weight_gradients.push_back(trace_.Allocate(weight_sizes_.front()));  // embedding
    trace_.Free(gradient);
    trace_.Free(embedded);

    // Optimizer step: Adam's fp32 master weights and moments appear on the
    // first step and stay; gradients are set to None afterwards.
    if (!optimizer_ready_) {
      for (std::uint64_t bytes : weight_sizes_) {
        for (int state = 0; state < 3; ++state) {
          persistent_.push_back(trace_.Allocate(bytes / kHalf * kFloat));
        }
      }
      optimizer_ready_ = true;
    }
    for (std::uint64_t id : weight_gradients) trace_.Free(id);
  }

  // Forward only, without autograd: every output dies once consumed.
  void Evaluate(std::uint64_t batch) {
    const Shapes embed = ShapesOf(options_, batch, false);
    std::uint64_t previous = trace_.Allocate(embed.activation);
    for (std::uint64_t layer = 0; layer < options_.layers; ++layer) {
      for (const Tensor& tensor :
           LayerForward(ShapesOf(options_, batch, local_[layer]), options_.hidden)) {
        const std::uint64_t id = trace_.Allocate(tensor.bytes);
        trace_.Free(previous);
        previous = id;
      }
    }
    const std::uint64_t logits = trace_.Allocate(embed.tokens * options_.vocabulary * kHalf);
    trace_.Free(previous);
    trace_.Free(logits);
  }

  const TrainingOptions& options_;
  TraceBuilder& trace_;
  Random random_;
  std::vector<bool> local_;
  std::uint64_t last_batch_ = 1;
  std::vector<std::uint64_t> weight_sizes_;
  std::vector<std::uint64_t> persistent_;
  bool optimizer_ready_ = false;
};

}  // namespace

void GenerateTraining(const TrainingOptions& options, TraceBuilder& trace) {
  Trainer(options, trace).Run();
}

}  // namespace memd::tracegen
