#include "common/location.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd {
namespace {

TEST(LocationTest, ParsesEveryFormAndPrintsItBack) {
  for (const char* text : {"host", "pinned", "device:0", "device:17"}) {
    auto location = Location::Parse(text);
    ASSERT_TRUE(location.ok()) << text;
    EXPECT_EQ(location->ToString(), text);
  }
  EXPECT_EQ(*Location::Parse(""), Location::Host());
  EXPECT_EQ(*Location::Parse("device:3"), Location::Device(3));
}

TEST(LocationTest, RejectsUnknownForms) {
  for (const char* text : {"gpu", "device:", "device:-1", "device:x",
                           "device:99999", "Host", "host "}) {
    auto location = Location::Parse(text);
    EXPECT_EQ(location.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(location.status().message(),
                ::testing::HasSubstr("expected host, pinned or device:N"));
  }
}

}  // namespace
}  // namespace memd
