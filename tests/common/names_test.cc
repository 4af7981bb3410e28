#include "common/names.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd {
namespace {

using ::testing::HasSubstr;

TEST(ValidateBufferNameTest, AcceptsNamesOfAllowedBytes) {
  for (const char* name : {"a", "frames/0", "job-7/step_3.bin", "A.B-C_D/e",
                           "...a", "a..b", ".hidden"}) {
    EXPECT_TRUE(ValidateBufferName(name).ok()) << name;
  }
  EXPECT_TRUE(ValidateBufferName(std::string(255, 'x')).ok());
}

TEST(ValidateBufferNameTest, RejectsEmptyName) {
  absl::Status status = ValidateBufferName("");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("empty"));
}

TEST(ValidateBufferNameTest, RejectsNameLongerThan255BytesWithTheNumbers) {
  absl::Status status = ValidateBufferName(std::string(256, 'x'));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("256 bytes"));
  EXPECT_THAT(status.message(), HasSubstr("255"));
}

TEST(ValidateBufferNameTest, RejectsBytesOutsideTheAlphabetNamingThePosition) {
  for (std::string name : std::vector<std::string>{"a b", "a\nb", "caf\xc3\xa9", "x:y", "a*", "a\\b",
                           std::string("a\0b", 3)}) {
    absl::Status status = ValidateBufferName(name);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(status.message(), HasSubstr("position")) << name;
  }
}

TEST(ValidateBufferNameTest, RejectsDotDotAndDotParts) {
  for (const char* name : {"..", "a/../b", "../a", "a/..", ".", "a/./b"}) {
    absl::Status status = ValidateBufferName(name);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(status.message(), HasSubstr("part")) << name;
  }
}

TEST(ValidateBufferNameTest, RejectsEmptyParts) {
  for (const char* name : {"/a", "a/", "a//b", "/"}) {
    absl::Status status = ValidateBufferName(name);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(status.message(), HasSubstr("empty part")) << name;
  }
}

}  // namespace
}  // namespace memd
