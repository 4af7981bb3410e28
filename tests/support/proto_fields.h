#pragma once

// Field-by-field walks over protobuf messages by reflection, the protocol's
// half of tests/support/struct_fields.h: a new field in memd.proto is found
// without anyone listing it.

#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "gtest/gtest.h"

namespace memd::test {

// Gives every field (and one element of every repeated field) a value no
// other field has and none has by default (enums: their last value).
inline void FillMessageDistinct(google::protobuf::Message& message, int& next) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection& reflection = *message.GetReflection();
  const google::protobuf::Descriptor& descriptor = *message.GetDescriptor();
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor* field = descriptor.field(i);
    ++next;
    const bool repeated = field->is_repeated();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE:
        FillMessageDistinct(repeated ? *reflection.AddMessage(&message, field)
                              : *reflection.MutableMessage(&message, field),
                     next);
        break;
#define MEMD_FILL(CPPTYPE, Name, value)                                  \
  case FieldDescriptor::CPPTYPE:                                         \
    if (repeated) {                                                      \
      reflection.Add##Name(&message, field, value);                      \
    } else {                                                             \
      reflection.Set##Name(&message, field, value);                      \
    }                                                                    \
    break;
        MEMD_FILL(CPPTYPE_INT32, Int32, next)
        MEMD_FILL(CPPTYPE_INT64, Int64, next)
        MEMD_FILL(CPPTYPE_UINT32, UInt32, static_cast<std::uint32_t>(next))
        MEMD_FILL(CPPTYPE_UINT64, UInt64, static_cast<std::uint64_t>(next))
        MEMD_FILL(CPPTYPE_DOUBLE, Double, next + 0.5)
        MEMD_FILL(CPPTYPE_FLOAT, Float, next + 0.5f)
        MEMD_FILL(CPPTYPE_BOOL, Bool, true)
        MEMD_FILL(CPPTYPE_STRING, String, "v" + std::to_string(next))
        MEMD_FILL(CPPTYPE_ENUM, EnumValue,
                  field->enum_type()->value(field->enum_type()->value_count() - 1)->number())
#undef MEMD_FILL
    }
  }
}

// Names of the fields at their default value (repeated: empty; inside the
// first element of a repeated message: "pools.segments"): what a conversion
// left out.
inline std::vector<std::string> MessageFieldsLeftDefault(
    const google::protobuf::Message& message) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection& reflection = *message.GetReflection();
  const google::protobuf::Descriptor& descriptor = *message.GetDescriptor();
  std::vector<std::string> left;
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor* field = descriptor.field(i);
    if (field->is_repeated() ? reflection.FieldSize(message, field) == 0
                             : !reflection.HasField(message, field)) {
      left.push_back(field->name());
      continue;
    }
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const google::protobuf::Message& inner =
        field->is_repeated() ? reflection.GetRepeatedMessage(message, field, 0)
                             : reflection.GetMessage(message, field);
    for (const std::string& name : MessageFieldsLeftDefault(inner)) {
      left.push_back(field->name() + "." + name);
    }
  }
  return left;
}

// Changes one field to another value (repeated: one element more).
inline void PerturbMessage(google::protobuf::Message& message,
                    const google::protobuf::FieldDescriptor* field) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection& reflection = *message.GetReflection();
  if (field->is_repeated()) {
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      google::protobuf::Message* added = reflection.AddMessage(&message, field);
      if (reflection.FieldSize(message, field) > 1) {
        added->CopyFrom(reflection.GetRepeatedMessage(message, field, 0));
        // Unlike the first in its first field: a list read as a map (by
        // key) would drop an equal one.
        PerturbMessage(*added, added->GetDescriptor()->field(0));
      }
      return;
    }
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      reflection.AddString(&message, field, "added'");
      return;
    }
    // No other repeated scalars in the messages these tests walk yet.
    ADD_FAILURE_AT(__FILE__, __LINE__) << "teach PerturbMessage repeated " << field->name();
    return;
  }
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      reflection.SetInt32(&message, field, reflection.GetInt32(message, field) + 100);
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      reflection.SetInt64(&message, field, reflection.GetInt64(message, field) + 100);
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      reflection.SetUInt32(&message, field, reflection.GetUInt32(message, field) + 100);
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      reflection.SetUInt64(&message, field, reflection.GetUInt64(message, field) + 100);
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      reflection.SetDouble(&message, field, reflection.GetDouble(message, field) + 1);
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      reflection.SetFloat(&message, field, reflection.GetFloat(message, field) + 1);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      reflection.SetBool(&message, field, !reflection.GetBool(message, field));
      break;
    case FieldDescriptor::CPPTYPE_STRING:
      reflection.SetString(&message, field, reflection.GetString(message, field) + "'");
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      // The first value (UNSPECIFIED), or the last from there.
      reflection.SetEnumValue(
          &message, field,
          reflection.GetEnumValue(message, field) == 0
              ? field->enum_type()->value(field->enum_type()->value_count() - 1)->number()
              : 0);
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      PerturbMessage(*reflection.MutableMessage(&message, field),
              field->message_type()->field(0));
      break;
  }
}

}  // namespace memd::test
