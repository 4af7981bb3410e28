#include "common/session_wire.h"

#include <cstddef>
#include <cstdint>

#include "common/proto_wire.h"

namespace memd::session_wire {
namespace {

using proto_wire::BytesFieldSize;
using proto_wire::Int32Bits;
using proto_wire::kLengthDelimited;
using proto_wire::kVarint;
using proto_wire::PutBytesField;
using proto_wire::PutVarintField;
using proto_wire::VarintFieldSize;

// SessionMessage's fields `call` and `answer`.
constexpr int kCallField = 4;
constexpr int kAnswerField = 5;

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
    if (!reader.ReadTag(&number, &type) || number < 1 || number > (is_call ? 3 : 4) ||
        (seen & (1u << number)) != 0) {
      return std::nullopt;
    }
    seen |= 1u << number;
    std::uint64_t value = 0;
    absl::string_view bytes;
    const bool is_varint = number <= 2;
    if (type != (is_varint ? kVarint : kLengthDelimited) ||
        !(is_varint ? reader.ReadVarint(&value) : reader.ReadBytes(&bytes))) {
      return std::nullopt;
    }
    // int32 and enum fields keep the low 32 bits, as protobuf's parser does.
    const auto low32 = static_cast<std::int32_t>(static_cast<std::uint32_t>(value));
    switch (number) {
      case 1:
        call.call_id = answer.call_id = value;
        break;
      case 2:
        call.kind = SessionCallKindOf(low32);
        answer.code = low32;
        break;
      case 3:
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
  PutVarintField(1, call.call_id, out);
  PutVarintField(2, kind, out);
  PutBytesField(3, call.request, out);
  return out;
}

std::string EncodeAnswer(const SessionAnswer& answer) {
  const std::uint64_t code = Int32Bits(answer.code);
  const std::size_t size = VarintFieldSize(answer.call_id) + VarintFieldSize(code) +
                           BytesFieldSize(answer.message.size()) +
                           BytesFieldSize(answer.reply.size());
  std::string out = Begin(kAnswerField, size);
  PutVarintField(1, answer.call_id, out);
  PutVarintField(2, code, out);
  PutBytesField(3, answer.message, out);
  PutBytesField(4, answer.reply, out);
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
