#pragma once

#include <cstdint>
#include <random>

namespace memd::tracegen {

/// Random numbers that are the same on every machine and standard library:
/// the raw output of std::mt19937_64 (fixed by the standard) mapped with
/// integer arithmetic only. std::*_distribution is avoided on purpose: its
/// output is implementation-defined, and the shipped traces must be
/// reproducible byte for byte. Not thread-safe (a value type).
class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}

  // Uniform in [0, n), n > 0 (multiply-shift: bias below n / 2^64).
  std::uint64_t Below(std::uint64_t n);
  // Uniform in [low, high].
  std::uint64_t Between(std::uint64_t low, std::uint64_t high);
  // True with probability numerator / denominator.
  bool Chance(std::uint64_t numerator, std::uint64_t denominator);

  // Log-uniform in [low, high], 1 <= low <= high: a uniform exponent,
  // linear within an octave.
  std::uint64_t LogUniform(std::uint64_t low, std::uint64_t high);
  // Lognormal-like, 1 <= low <= median <= high: log2 of the result is
  // roughly normal (a sum of 12 uniforms) around log2(median), with a
  // standard deviation of `sigma_milli_octaves` / 1000 octaves, clamped to
  // [low, high].
  std::uint64_t LogNormal(std::uint64_t median, std::uint64_t sigma_milli_octaves,
                          std::uint64_t low, std::uint64_t high);

 private:
  std::mt19937_64 engine_;
};

// Rounds `value` up to a multiple of `granularity` (> 0).
constexpr std::uint64_t RoundUp(std::uint64_t value, std::uint64_t granularity) {
  return (value + granularity - 1) / granularity * granularity;
}

}  // namespace memd::tracegen
