#pragma once

// Protobuf's wire format, for the few messages memd writes by hand on its
// hottest paths (session_wire.cc: the fast control path's packets;
// daemon/durable/state_codec.cc: the journal's lease records), where
// building, serializing and freeing the message objects costs more than
// the bytes. Each such writer is tested byte for byte against protobuf's
// own serialization. Header-only, no protobuf needed.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace memd::proto_wire {

// The wire types used here, and the tag of field `number` (one byte: fields
// below 16).
inline constexpr std::uint8_t kVarint = 0;
inline constexpr std::uint8_t kLengthDelimited = 2;
constexpr char Tag(int number, std::uint8_t type) { return static_cast<char>(number << 3 | type); }

inline std::size_t VarintSize(std::uint64_t value) {
  std::size_t size = 1;
  for (; value >= 0x80; value >>= 7) ++size;
  return size;
}

inline void PutVarint(std::uint64_t value, std::string& out) {
  for (; value >= 0x80; value >>= 7) out.push_back(static_cast<char>(value | 0x80));
  out.push_back(static_cast<char>(value));
}

// An int32 field's varint: protobuf writes a negative one sign-extended to
// 64 bits (ten bytes).
inline std::uint64_t Int32Bits(std::int32_t value) {
  return static_cast<std::uint64_t>(static_cast<std::int64_t>(value));
}

// Fields as proto3 writes them: one that holds its default is left out.
inline std::size_t VarintFieldSize(std::uint64_t value) {
  return value == 0 ? 0 : 1 + VarintSize(value);
}
inline std::size_t BytesFieldSize(std::size_t bytes) {
  return bytes == 0 ? 0 : 1 + VarintSize(bytes) + bytes;
}
inline void PutVarintField(int number, std::uint64_t value, std::string& out) {
  if (value == 0) return;
  out.push_back(Tag(number, kVarint));
  PutVarint(value, out);
}
inline void PutBytesField(int number, std::string_view value, std::string& out) {
  if (value.empty()) return;
  out.push_back(Tag(number, kLengthDelimited));
  PutVarint(value.size(), out);
  out.append(value);
}
// The head of an embedded message field of `bytes` bytes (written even when
// empty: a set sub-message, or a oneof member, always is).
inline void PutMessageHead(int number, std::size_t bytes, std::string& out) {
  out.push_back(Tag(number, kLengthDelimited));
  PutVarint(bytes, out);
}
inline std::size_t MessageFieldSize(std::size_t bytes) { return 1 + VarintSize(bytes) + bytes; }

}  // namespace memd::proto_wire
