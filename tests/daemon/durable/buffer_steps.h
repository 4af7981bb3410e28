#pragma once

// Steps the durability tests share: buffers published with a known pattern
// before memd dies, and checked after it came back.

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/client/pattern.h"

namespace memd::test {

// Creates NAME of SIZE with `options`, fills it with Pattern(SEED), seals.
inline void Publish(Client& client, const std::string& name, std::uint64_t size,
                    std::uint32_t seed, CreateOptions options = {}) {
  auto buffer = client.Create(name, size, options);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  FillPattern(buffer->mutable_data(), seed);
  ASSERT_TRUE(buffer->Seal().ok());
}

// Opens NAME and checks it holds Pattern(SEED).
inline void ExpectPattern(Client& client, const std::string& name, std::uint32_t seed) {
  auto buffer = client.Open(name);
  ASSERT_TRUE(buffer.ok()) << name << ": " << buffer.status();
  EXPECT_TRUE(MatchesPattern(buffer->data(), seed)) << name;
}

// The names memd lists, in its order; empty when the listing fails.
inline std::vector<std::string> ListedNames(Client& client) {
  std::vector<std::string> names;
  auto listed = client.List();
  if (listed.ok()) {
    for (const BufferInfo& b : *listed) names.push_back(b.name);
  }
  return names;
}

}  // namespace memd::test
