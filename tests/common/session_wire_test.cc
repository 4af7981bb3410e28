// The hand-written packets of the fast control path (common/session_wire.h)
// against protobuf, the contract: they write the bytes protobuf writes, and
// every packet reads as protobuf reads it, whichever reader took it.

#include "common/session_wire.h"

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "common/session_codec.h"
#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "google/protobuf/stubs/logging.h"
#include "memd/v1/memd.pb.h"

namespace memd {
namespace {

std::string ProtobufBytes(const SessionCall& call) {
  v1::SessionMessage proto;
  proto.mutable_call()->set_call_id(call.call_id);
  proto.mutable_call()->set_kind(static_cast<v1::SessionCallKind>(call.kind));
  proto.mutable_call()->set_request(call.request);
  return proto.SerializeAsString();
}

std::string ProtobufBytes(const SessionAnswer& answer) {
  v1::SessionMessage proto;
  proto.mutable_answer()->set_call_id(answer.call_id);
  proto.mutable_answer()->set_code(answer.code);
  proto.mutable_answer()->set_message(answer.message);
  proto.mutable_answer()->set_reply(answer.reply);
  return proto.SerializeAsString();
}

// What protobuf reads in `bytes`, as "call <id> <kind> <request>" or
// "answer <id> <code> <message> <reply>", "other" for another kind of
// message, "error" when it does not parse or holds no kind of message.
std::string ProtobufReading(const std::string& bytes) {
  v1::SessionMessage proto;
  if (!proto.ParseFromString(bytes) || proto.kind_case() == v1::SessionMessage::KIND_NOT_SET) {
    return "error";
  }
  if (proto.has_call()) {
    return "call " + std::to_string(proto.call().call_id()) + " " +
           std::to_string(static_cast<int>(SessionCallKindOf(proto.call().kind()))) + " " +
           proto.call().request();
  }
  if (proto.has_answer()) {
    return "answer " + std::to_string(proto.answer().call_id()) + " " +
           std::to_string(proto.answer().code()) + " " + proto.answer().message() + " " +
           proto.answer().reply();
  }
  return "other";
}

// The same reading of a decoded message.
std::string Reading(const absl::StatusOr<SessionMessage>& message) {
  if (!message.ok()) return "error";
  if (const auto* call = std::get_if<SessionCall>(&*message)) {
    return "call " + std::to_string(call->call_id) + " " +
           std::to_string(static_cast<int>(call->kind)) + " " + call->request;
  }
  if (const auto* answer = std::get_if<SessionAnswer>(&*message)) {
    return "answer " + std::to_string(answer->call_id) + " " + std::to_string(answer->code) +
           " " + answer->message + " " + answer->reply;
  }
  return "other";
}

std::vector<SessionCall> SomeCalls() {
  return {{0, SessionCallKind::kRelease, "x"},
          {1, SessionCallKind::kOpen, std::string(40, 'o')},
          {~std::uint64_t{0}, SessionCallKind::kSeal, std::string(300, 's')},
          {7, SessionCallKind::kBarrier, ""},
          {0, SessionCallKind::kUnknown, ""}};
}

std::vector<SessionAnswer> SomeAnswers() {
  return {{1, 0, "", std::string(128, 'r')},
          {~std::uint64_t{0}, 5, "no buffer \"a\"", ""},
          {3, -1, "", "r"},
          {4, std::numeric_limits<int>::min(), std::string(200, 'm'), std::string(20000, 'r')},
          {0, 0, "", ""}};
}

TEST(SessionWireTest, CallsAndAnswersAreWrittenAsProtobufWritesThem) {
  for (const SessionCall& call : SomeCalls()) {
    EXPECT_EQ(session_wire::EncodeCall(call), ProtobufBytes(call)) << call.call_id;
    EXPECT_EQ(EncodeSessionMessage(call), ProtobufBytes(call)) << call.call_id;
  }
  for (const SessionAnswer& answer : SomeAnswers()) {
    EXPECT_EQ(session_wire::EncodeAnswer(answer), ProtobufBytes(answer)) << answer.call_id;
    EXPECT_EQ(EncodeSessionMessage(answer), ProtobufBytes(answer)) << answer.call_id;
  }
}

TEST(SessionWireTest, WhatItWritesItReadsItself) {
  for (const SessionCall& call : SomeCalls()) {
    const std::string bytes = session_wire::EncodeCall(call);
    std::optional<SessionMessage> read = session_wire::DecodeCallOrAnswer(bytes);
    ASSERT_TRUE(read.has_value()) << call.call_id;
    EXPECT_EQ(Reading(*read), ProtobufReading(bytes));
  }
  for (const SessionAnswer& answer : SomeAnswers()) {
    const std::string bytes = session_wire::EncodeAnswer(answer);
    std::optional<SessionMessage> read = session_wire::DecodeCallOrAnswer(bytes);
    ASSERT_TRUE(read.has_value()) << answer.call_id;
    EXPECT_EQ(Reading(*read), ProtobufReading(bytes));
  }
}

// Shapes protobuf reads that the hand reader leaves to it, and one it must
// refuse: DecodeSessionMessage reads each as protobuf does.
TEST(SessionWireTest, OtherShapesGoToProtobufAndReadTheSame) {
  const std::vector<std::string> packets = {
      // The call's kind twice (the last counts), and call_id after request.
      std::string("\x22\x06\x10\x01\x10\x02\x08\x05", 8),
      // An unknown field 9 in the call.
      std::string("\x22\x04\x08\x05\x48\x01", 6),
      // Two call fields in one message (protobuf merges them).
      std::string("\x22\x02\x08\x05\x22\x02\x10\x03", 8),
      // A non-minimal tag (0x88 0x00 is field 1, varint).
      std::string("\x22\x03\x88\x00\x05", 5),
      // An answer whose message is not UTF-8 (protobuf refuses it).
      std::string("\x2a\x03\x1a\x01\xff", 5),
      // An answer whose message is UTF-8 beyond ASCII.
      std::string("\x2a\x04\x1a\x02\xc3\xa9", 6),
      // A kind above 32 bits (protobuf keeps the low 32: Open).
      std::string("\x22\x07\x10\x81\x80\x80\x80\x10", 8),
  };
  google::protobuf::LogSilencer quiet;
  for (const std::string& bytes : packets) {
    EXPECT_EQ(Reading(DecodeSessionMessage(bytes)), ProtobufReading(bytes))
        << absl::CEscape(bytes);
  }
  EXPECT_FALSE(session_wire::DecodeCallOrAnswer(packets[0]).has_value());
  EXPECT_FALSE(session_wire::DecodeCallOrAnswer(packets[4]).has_value());
}

// Packets of every call and answer above with bytes changed, cut or added
// at random: DecodeSessionMessage reads each exactly as protobuf does.
TEST(SessionWireTest, DamagedPacketsReadAsProtobufReadsThem) {
  std::vector<std::string> packets;
  for (const SessionCall& call : SomeCalls()) packets.push_back(session_wire::EncodeCall(call));
  for (const SessionAnswer& answer : SomeAnswers()) {
    if (answer.reply.size() < 1000) packets.push_back(session_wire::EncodeAnswer(answer));
  }
  // Protobuf logs every message that is not UTF-8 it refuses.
  google::protobuf::LogSilencer quiet;
  std::mt19937 random(28);  // Fixed seed: the same packets every run.
  int fast = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = packets[random() % packets.size()];
    for (int changes = 1 + random() % 3; changes > 0; --changes) {
      const std::size_t at = random() % (bytes.size() + 1);
      switch (random() % 3) {
        case 0:
          if (at < bytes.size()) bytes[at] = static_cast<char>(random());
          break;
        case 1:
          bytes.resize(at);
          break;
        default:
          bytes.insert(at, 1, static_cast<char>(random()));
          break;
      }
    }
    if (session_wire::DecodeCallOrAnswer(bytes).has_value()) ++fast;
    ASSERT_EQ(Reading(DecodeSessionMessage(bytes)), ProtobufReading(bytes))
        << absl::CEscape(bytes);
  }
  // Both readers were tried: some damaged packets still have the usual shape.
  EXPECT_GT(fast, 100);
}

}  // namespace
}  // namespace memd
