#include "common/session_wire.h"

#include <cstddef>
#include <cstdint>

#include "common/proto_wire.h"
#include "memd/v1/memd.pb.h"

namespace memd::session_wire {
namespace {

using proto_wire::BytesFieldSize;
using proto_wire::Int32Bits;
using proto_wire::kLengthDelimited;
using proto_wire::kVarint;
using proto_wire::PutBytesField;
using proto_wire::PutVarintField;
using proto_wire::VarintFieldSize;

// The field numbers, from the contract. SessionCall and SessionAnswer share
// a layout ReadBody relies on: 1 the call id, 2 a varint (kind, code), then
// the length-delimited fields (request; message and reply).
constexpr int kCallField = v1::SessionMessage::kCallFieldNumber;
constexpr int kAnswerField = v1::SessionMessage::kAnswerFieldNumber;
constexpr int kCallIdField = v1::SessionCall::kCallIdFieldNumber;
constexpr int kKindField = v1::SessionCall::kKindFieldNumber;
constexpr int kRequestField = v1::SessionCall::kRequestFieldNumber;
constexpr int kCodeField = v1::SessionAnswer::kCodeFieldNumber;
constexpr int kMessageField = v1::SessionAnswer::kMessageFieldNumber;
constexpr int kReplyField = v1::SessionAnswer::kReplyFieldNumber;
static_assert(kCallIdField == 1 && v1::SessionAnswer::kCallIdFieldNumber == 1 &&
              kKindField == 2 && kCodeField == 2 && kRequestField == 3 &&
              kMessageField == 3 && kReplyField == 4);
static_assert(kCallField < 16 && kAnswerField < 16);  // One-byte tags.

// The packet: one SessionMessage field of `size` bytes, begun.
std::string Begin(int field, std::size_t size) {
  std::string out;
  out.reserve(proto_wire::MessageFieldSize(size));
  proto_wire::PutMessageHead(field, size, out);
  return out;
}

// Reads what the encoders above write. Every method returns false where
// protobuf's parser might read the bytes otherwise or refuse them, so that
// the caller hands those packets to it.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : rest_(bytes) {}

  bool done() const { return rest_.empty(); }

  // A one-byte tag, as every field here has when written minimally.
  bool ReadTag(int* number, std::uint8_t* type) {
    if (rest_.empty() || static_cast<std::uint8_t>(rest_[0]) >= 0x80) return false;
    const auto tag = static_cast<std::uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    *number = tag >> 3;
    *type = tag & 7;
    return true;
  }

  // At most ten bytes, no bits beyond the 64th.
  bool ReadVarint(std::uint64_t* value) {
    std::uint64_t result = 0;
    for (std::size_t i = 0; i < 10 && i < rest_.size(); ++i) {
      const auto byte = static_cast<std::uint8_t>(rest_[i]);
      if (i == 9 && byte > 1) return false;
      result |= static_cast<std::uint64_t>(byte & 0x7f) << (7 * i);
      if (byte < 0x80) {
        rest_.remove_prefix(i + 1);
        *value = result;
        return true;
      }
    }
    return false;
  }

  // A length and that many bytes, all within the packet.
  bool ReadBytes(absl::string_view* value) {
    std::uint64_t size = 0;
    if (!ReadVarint(&size) || size > rest_.size()) return false;
    *value = rest_.substr(0, size);
    rest_.remove_prefix(size);
    return true;
  }

 private:
  absl::string_view rest_;
};

bool IsAscii(absl::string_view text) {
  for (char c : text) {
    if (static_cast<std::uint8_t>(c) >= 0x80) return false;
  }
  return true;
}

// The fields of a SessionCall (`is_call`) or SessionAnswer, each at most once.
std::optional<SessionMessage> ReadBody(absl::string_view body, bool is_call) {
  Reader reader(body);
  unsigned seen = 0;
  SessionCall call;
  SessionAnswer answer;
  while (!reader.done()) {
    int number = 0;
    std::uint8_t type = 0;
    if (!reader.ReadTag(&number, &type) || number < kCallIdField ||
        number > (is_call ? kRequestField : kReplyField) ||
        (seen & (1u << number)) != 0) {
      return std::nullopt;
    }
    seen |= 1u << number;
    std::uint64_t value = 0;
    absl::string_view bytes;
    const bool is_varint = number <= kKindField;
    if (type != (is_varint ? kVarint : kLengthDelimited) ||
        !(is_varint ? reader.ReadVarint(&value) : reader.ReadBytes(&bytes))) {
      return std::nullopt;
    }
    // int32 and enum fields keep the low 32 bits, as protobuf's parser does.
    const auto low32 = static_cast<std::int32_t>(static_cast<std::uint32_t>(value));
    switch (number) {
      case kCallIdField:
        call.call_id = answer.call_id = value;
        break;
      case kKindField:  // And kCodeField.
        call.kind = SessionCallKindOf(low32);
        answer.code = low32;
        break;
      case kRequestField:  // And kMessageField.
        // SessionAnswer.message is a proto3 string: protobuf checks its UTF-8.
        if (!is_call && !IsAscii(bytes)) return std::nullopt;
        (is_call ? call.request : answer.message) = std::string(bytes);
        break;
      default:
        answer.reply = std::string(bytes);
        break;
    }
  }
  if (is_call) return SessionMessage(std::move(call));
  return SessionMessage(std::move(answer));
}

}  // namespace

std::string EncodeCall(const SessionCall& call) {
  const std::uint64_t kind = Int32Bits(static_cast<std::int32_t>(call.kind));
  const std::size_t size =
      VarintFieldSize(call.call_id) + VarintFieldSize(kind) + BytesFieldSize(call.request.size());
  std::string out = Begin(kCallField, size);
  PutVarintField(kCallIdField, call.call_id, out);
  PutVarintField(kKindField, kind, out);
  PutBytesField(kRequestField, call.request, out);
  return out;
}

std::string EncodeAnswer(const SessionAnswer& answer) {
  const std::uint64_t code = Int32Bits(answer.code);
  const std::size_t size = VarintFieldSize(answer.call_id) + VarintFieldSize(code) +
                           BytesFieldSize(answer.message.size()) +
                           BytesFieldSize(answer.reply.size());
  std::string out = Begin(kAnswerField, size);
  PutVarintField(kCallIdField, answer.call_id, out);
  PutVarintField(kCodeField, code, out);
  PutBytesField(kMessageField, answer.message, out);
  PutBytesField(kReplyField, answer.reply, out);
  return out;
}

std::optional<SessionMessage> DecodeCallOrAnswer(absl::string_view bytes) {
  Reader reader(bytes);
  int number = 0;
  std::uint8_t type = 0;
  absl::string_view body;
  if (!reader.ReadTag(&number, &type) || type != kLengthDelimited ||
      (number != kCallField && number != kAnswerField) || !reader.ReadBytes(&body) ||
      !reader.done()) {
    return std::nullopt;
  }
  return ReadBody(body, /*is_call=*/number == kCallField);
}

}  // namespace memd::session_wire
