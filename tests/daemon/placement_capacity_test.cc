#include "daemon/placement_capacity.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

constexpr char kMeminfo[] =
    "MemTotal:       131072000 kB\n"
    "MemFree:         1000000 kB\n"
    "MemAvailable:   65536000 kB\n"
    "Buffers:          123456 kB\n";

// The fake backend with two GPUs whose free memory a test sets.
class TwoGpus : public test::FakeBackend {
 public:
  std::vector<backend::DeviceInfo> devices() const override {
    backend::DeviceInfo first;
    first.ordinal = 0;
    first.total_bytes = 16;
    first.free_bytes = 4;
    backend::DeviceInfo second = first;
    second.ordinal = 1;
    second.free_bytes = 12;
    ++calls;
    return {first, second};
  }
  mutable int calls = 0;
};

TEST(PlacementCapacityTest, MeminfoGivesAvailableAndTotalInBytes) {
  auto capacity = ParseMeminfo(kMeminfo);
  ASSERT_TRUE(capacity.has_value());
  EXPECT_EQ(capacity->free_bytes, std::uint64_t{65536000} << 10);
  EXPECT_EQ(capacity->total_bytes, std::uint64_t{131072000} << 10);
  EXPECT_FALSE(ParseMeminfo("MemTotal: 1 kB\n").has_value()) << "no MemAvailable";
  EXPECT_FALSE(ParseMeminfo("MemTotal: x kB\nMemAvailable: 1 kB\n").has_value());
  EXPECT_FALSE(ParseMeminfo("MemTotal: 99999999999999999999 kB\nMemAvailable: 1 kB\n"));
}

TEST(PlacementCapacityTest, DevicesFromTheBackendHostAndPinnedFromMeminfo) {
  test::TempDir dir;
  const std::string path = dir.Join("meminfo");
  std::ofstream(path) << kMeminfo;
  TwoGpus backend;
  PlacementCapacity capacity(backend, path);
  auto of = capacity.Of({Location::Device(1), Location::Host(), Location::Pinned(),
                         Location::Device(0), Location::Device(5)});
  ASSERT_EQ(of.size(), 5u);
  ASSERT_TRUE(of[0].has_value());
  EXPECT_EQ(of[0]->free_bytes, 12u);
  EXPECT_EQ(of[0]->total_bytes, 16u);
  ASSERT_TRUE(of[1].has_value() && of[2].has_value());
  EXPECT_EQ(of[1]->free_bytes, std::uint64_t{65536000} << 10);
  EXPECT_EQ(of[2]->free_bytes, of[1]->free_bytes) << "pinned memory is host memory";
  EXPECT_EQ(of[3]->free_bytes, 4u);
  EXPECT_FALSE(of[4].has_value()) << "a GPU the backend does not serve";
  EXPECT_EQ(backend.calls, 1) << "one query for every device";

  PlacementCapacity unreadable(backend, dir.Join("missing"));
  EXPECT_FALSE(unreadable.Of({Location::Host()})[0].has_value());
}

}  // namespace
}  // namespace memd
