#include "tools/tracegen/random.h"

#include <algorithm>
#include <bit>

namespace memd::tracegen {
namespace {

// log2 in fixed point with 16 fraction bits; 2^x approximated linearly
// within each octave, the exact inverse of Exp2Fixed on octave boundaries.
constexpr int kFractionBits = 16;
constexpr std::int64_t kOne = std::int64_t{1} << kFractionBits;

std::int64_t Log2Fixed(std::uint64_t value) {
  const int exponent = std::bit_width(value) - 1;
  // The bits below the leading one, scaled to 16 bits.
  const std::uint64_t mantissa = value - (std::uint64_t{1} << exponent);
  const std::uint64_t fraction =
      exponent >= kFractionBits ? mantissa >> (exponent - kFractionBits)
                                : mantissa << (kFractionBits - exponent);
  return std::int64_t{exponent} * kOne + static_cast<std::int64_t>(fraction);
}

std::uint64_t Exp2Fixed(std::int64_t log) {
  const std::int64_t exponent = log / kOne;
  const std::uint64_t mantissa = static_cast<std::uint64_t>(kOne + log % kOne);
  return exponent >= kFractionBits ? mantissa << (exponent - kFractionBits)
                                   : mantissa >> (kFractionBits - exponent);
}

}  // namespace

std::uint64_t Random::Below(std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(engine_()) * n) >> 64);
}

std::uint64_t Random::Between(std::uint64_t low, std::uint64_t high) {
  return low + Below(high - low + 1);
}

bool Random::Chance(std::uint64_t numerator, std::uint64_t denominator) {
  return Below(denominator) < numerator;
}

std::uint64_t Random::LogUniform(std::uint64_t low, std::uint64_t high) {
  const std::int64_t from = Log2Fixed(low);
  const std::int64_t to = Log2Fixed(high);
  const std::int64_t log = from + static_cast<std::int64_t>(
                                      Below(static_cast<std::uint64_t>(to - from) + 1));
  return std::clamp(Exp2Fixed(log), low, high);
}

std::uint64_t Random::LogNormal(std::uint64_t median, std::uint64_t sigma_milli_octaves,
                                std::uint64_t low, std::uint64_t high) {
  // Irwin-Hall: 12 uniforms on [0, 1) sum to mean 6 and variance 1.
  std::int64_t normal = -6 * kOne;
  for (int i = 0; i < 12; ++i) normal += static_cast<std::int64_t>(Below(kOne));
  const std::int64_t offset =
      normal * static_cast<std::int64_t>(sigma_milli_octaves) / 1000;
  const std::int64_t log = std::clamp(Log2Fixed(median) + offset, Log2Fixed(low),
                                      Log2Fixed(high));
  return std::clamp(Exp2Fixed(log), low, high);
}

}  // namespace memd::tracegen
