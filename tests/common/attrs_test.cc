// common/attrs: what a buffer's attributes may hold, refused with the key
// and the limit otherwise.

#include "common/attrs.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Message(const absl::Status& status) { return std::string(status.message()); }

TEST(AttrsTest, TypicalAttributesAreValid) {
  EXPECT_TRUE(ValidateAttrs({}).ok());
  EXPECT_TRUE(ValidateAttrs({{"dtype", "float16"},
                             {"shape", "4096,4096"},
                             {"layout", "row-major"},
                             {"my.key_2-x", ""},
                             {"note", "a value with spaces & (punctuation)!"}})
                  .ok());
}

TEST(AttrsTest, KeysAreShortAndPlain) {
  absl::Status empty = ValidateAttrs({{"", "x"}});
  EXPECT_TRUE(absl::IsInvalidArgument(empty));
  EXPECT_THAT(Message(empty), HasSubstr("empty"));
  absl::Status long_key = ValidateAttrs({{std::string(65, 'k'), "x"}});
  EXPECT_THAT(Message(long_key), AllOf(HasSubstr("65 bytes"), HasSubstr("limit is 64")));
  EXPECT_TRUE(ValidateAttrs({{std::string(64, 'k'), "x"}}).ok());
  absl::Status slash = ValidateAttrs({{"a/b", "x"}});
  EXPECT_TRUE(absl::IsInvalidArgument(slash));
  EXPECT_THAT(Message(slash), AllOf(HasSubstr("0x2f"), HasSubstr("position 1")));
}

TEST(AttrsTest, ValuesArePrintableAndBounded) {
  absl::Status newline = ValidateAttrs({{"k", "a\nb"}});
  EXPECT_TRUE(absl::IsInvalidArgument(newline));
  EXPECT_THAT(Message(newline), AllOf(HasSubstr("'k'"), HasSubstr("0x0a"), HasSubstr("printable")));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateAttrs({{"k", std::string("a\0b", 3)}})));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateAttrs({{"k", "\xc3\xa9"}})));
  absl::Status long_value = ValidateAttrs({{"k", std::string(257, 'v')}});
  EXPECT_THAT(Message(long_value), AllOf(HasSubstr("257 bytes"), HasSubstr("limit is 256")));
  EXPECT_TRUE(ValidateAttrs({{"k", std::string(256, 'v')}}).ok());
}

TEST(AttrsTest, CountAndTotalAreBounded) {
  BufferAttrs many;
  for (int i = 0; i < 17; ++i) many["k" + std::to_string(i)] = "v";
  absl::Status count = ValidateAttrs(many);
  EXPECT_THAT(Message(count), AllOf(HasSubstr("17 attributes"), HasSubstr("limit is 16")));
  many.erase("k16");
  EXPECT_TRUE(ValidateAttrs(many).ok());
  // Five of 1 + 255 bytes: 1280 in all.
  BufferAttrs big;
  for (char key : std::string("abcde")) big[std::string(1, key)] = std::string(255, 'v');
  absl::Status total = ValidateAttrs(big);
  EXPECT_TRUE(absl::IsInvalidArgument(total));
  EXPECT_THAT(Message(total), AllOf(HasSubstr("1280 bytes"), HasSubstr("limit is 1024")));
}

TEST(AttrsTest, ParseSplitsAtTheFirstEquals) {
  auto shape = ParseAttr("shape=4096,4096");
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->first, "shape");
  EXPECT_EQ(shape->second, "4096,4096");
  auto equation = ParseAttr("expr=a=b");
  ASSERT_TRUE(equation.ok());
  EXPECT_EQ(equation->first, "expr");
  EXPECT_EQ(equation->second, "a=b");
  auto empty = ParseAttr("flag=");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->second, "");
  EXPECT_TRUE(absl::IsInvalidArgument(ParseAttr("novalue").status()));
}

}  // namespace
}  // namespace memd
