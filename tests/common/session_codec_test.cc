// The session socket's wire format: what one end encodes the other decodes,
// and bytes that are not a session message are an error, never a crash.

#include "common/session_codec.h"

#include <cstdint>
#include <random>
#include <string>
#include <variant>

#include "gtest/gtest.h"

namespace memd {
namespace {

TEST(SessionCodecTest, AGreetingSurvivesTheRoundTrip) {
  const SessionHello sent{kSessionProtocolVersion, 42, std::string(32, 'a'), "", 0};
  absl::StatusOr<SessionMessage> got = DecodeSessionMessage(EncodeSessionMessage(sent));
  ASSERT_TRUE(got.ok()) << got.status();
  const auto* hello = std::get_if<SessionHello>(&*got);
  ASSERT_NE(hello, nullptr);
  EXPECT_EQ(hello->protocol_version, kSessionProtocolVersion);
  EXPECT_EQ(hello->session_id, 42u);
  EXPECT_EQ(hello->token, sent.token);
  EXPECT_TRUE(hello->error.empty());
  EXPECT_EQ(hello->error_code, 0);
}

TEST(SessionCodecTest, ARefusalSurvivesTheRoundTrip) {
  const SessionHello sent{kSessionProtocolVersion, 0, "", "too many sessions",
                          static_cast<int>(absl::StatusCode::kResourceExhausted)};
  absl::StatusOr<SessionMessage> got = DecodeSessionMessage(EncodeSessionMessage(sent));
  ASSERT_TRUE(got.ok()) << got.status();
  const auto* hello = std::get_if<SessionHello>(&*got);
  ASSERT_NE(hello, nullptr);
  EXPECT_EQ(hello->error, "too many sessions");
  EXPECT_EQ(hello->error_code, static_cast<int>(absl::StatusCode::kResourceExhausted));
}

TEST(SessionCodecTest, ADescriptorsSequenceNumberSurvivesTheRoundTrip) {
  for (std::uint64_t seq : {std::uint64_t{1}, ~std::uint64_t{0}}) {
    absl::StatusOr<SessionMessage> got =
        DecodeSessionMessage(EncodeSessionMessage(SessionFd{seq}));
    ASSERT_TRUE(got.ok()) << got.status();
    const auto* fd = std::get_if<SessionFd>(&*got);
    ASSERT_NE(fd, nullptr);
    EXPECT_EQ(fd->seq, seq);
  }
}

TEST(SessionCodecTest, FreedBufferIdsSurviveTheRoundTrip) {
  const SessionFreed sent{{1, 42, ~std::uint64_t{0}}};
  absl::StatusOr<SessionMessage> got = DecodeSessionMessage(EncodeSessionMessage(sent));
  ASSERT_TRUE(got.ok()) << got.status();
  const auto* freed = std::get_if<SessionFreed>(&*got);
  ASSERT_NE(freed, nullptr);
  EXPECT_EQ(freed->buffer_ids, sent.buffer_ids);
}

TEST(SessionCodecTest, ATruncatedMessageIsDataLoss) {
  const std::string bytes =
      EncodeSessionMessage(SessionHello{kSessionProtocolVersion, 7, "token", "", 0});
  absl::StatusOr<SessionMessage> got =
      DecodeSessionMessage(absl::string_view(bytes).substr(0, bytes.size() - 1));
  EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
}

TEST(SessionCodecTest, AMessageOfNoKnownKindIsDataLoss) {
  // Empty: no kind at all. "\x20\x01": field 4, a kind a later version
  // might add.
  for (absl::string_view bytes : {absl::string_view(""), absl::string_view("\x20\x01")}) {
    absl::StatusOr<SessionMessage> got = DecodeSessionMessage(bytes);
    EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
  }
}

TEST(SessionCodecTest, ArbitraryBytesDecodeOrFailButNeverCrash) {
  std::mt19937 random(1);  // Fixed seed: the same bytes every run.
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(random() % 64, '\0');
    for (char& byte : bytes) byte = static_cast<char>(random());
    absl::StatusOr<SessionMessage> got = DecodeSessionMessage(bytes);
    if (!got.ok()) {
      EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
    }
  }
}

}  // namespace
}  // namespace memd
