#pragma once

// The fast control path's two packets, SessionCall and SessionAnswer, written
// and read without protobuf's message objects: one per call each way on the
// hottest path memd has (issue 28, target 4), where building, copying and
// freeing SessionMessage, its inner message and their strings cost more than
// the bytes. The bytes are exactly what protobuf writes for
// memd.v1.SessionMessage{call} and {answer} (proto/memd/v1/memd.proto, the
// contract). Reading takes only the shape protobuf writes (each field at most
// once, no unknown fields, minimal tags, an ASCII message) and leaves every
// other packet to the protobuf parser, so that what a packet means never
// depends on which reader took it. Used by session_codec.cc alone.

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "common/session_codec.h"

namespace memd::session_wire {

// The packet of `call` or `answer`, byte for byte as
// v1::SessionMessage::SerializeAsString() writes it.
std::string EncodeCall(const SessionCall& call);
std::string EncodeAnswer(const SessionAnswer& answer);

// The call or answer in `bytes` when they have the shape EncodeCall and
// EncodeAnswer write (fields in any order); nullopt for anything else: not
// necessarily malformed, only for the protobuf parser to judge.
std::optional<SessionMessage> DecodeCallOrAnswer(absl::string_view bytes);

}  // namespace memd::session_wire
