#pragma once

// Steps the durability tests share: buffers published with a known pattern
// before memd dies, and checked after it came back.

#include <signal.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/client/pattern.h"
#include "tests/support/service_manager.h"

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

// A client of the memd serving `dir`, or nullptr (the failure recorded).
inline std::unique_ptr<Client> ConnectOrFail(const std::string& dir, ConnectOptions options = {}) {
  options.socket_dir = dir;
  auto client = Client::Connect(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

// kill -9 of the service `manager` runs (memd), waited for.
inline void KillWithSigkill(ServiceManager& manager) {
  ASSERT_TRUE(manager.Kill(SIGKILL).ok());
  auto status = manager.Wait();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 128 + SIGKILL) << "memd died of something else first";
}

// What a listing says of a buffer, less what changes with every daemon
// (lease counts): equal before and after a restart that kept it.
inline std::string Describe(const BufferInfo& b) {
  std::string attrs;
  for (const auto& [key, value] : b.attrs) absl::StrAppend(&attrs, key, "=", value, ",");
  return absl::StrCat(b.name, " id ", b.id, " size ", b.size, " at ", b.location, " uid ",
                      b.owner_uid, " gid ", b.owner_gid, " mode ", absl::StrFormat("%04o", b.mode),
                      " state ", static_cast<int>(b.state), " persistence ",
                      static_cast<int>(b.persistence), " unlinked ", b.unlinked, " created ",
                      absl::FormatTime(b.created), " sealed ",
                      b.sealed ? absl::FormatTime(*b.sealed) : "no", " pid ", b.creator_pid, " ",
                      attrs);
}

inline std::vector<std::string> Describe(const std::vector<BufferInfo>& buffers) {
  std::vector<std::string> lines;
  for (const BufferInfo& b : buffers) lines.push_back(Describe(b));
  return lines;
}

// memd holds nothing: no buffer listed, no memory reserved in any pool.
inline void ExpectNothingHeld(Client& client) {
  auto listed = client.List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty()) << listed->size() << " buffers listed";
  auto stats = client.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const PoolStats& pool : stats->pools) EXPECT_EQ(pool.reserved_bytes, 0u) << pool.location;
}

}  // namespace memd::test
