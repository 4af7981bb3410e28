#pragma once

// Field-by-field walks over plain structs, for tests that must notice a
// field added on one side of a conversion only (tests/daemon/service/
// convert_test.cc, tests/client/convert_test.cc).
//
// C++ cannot list a struct's fields, so a test lists them once by position:
//
//   template <> struct Fields<pool::SizeClassStats> {
//     static auto Of(auto& s) { auto& [bytes, allocations, cached] = s;
//                               return std::tie(bytes, allocations, cached); }
//   };
//
// A structured binding must name every field, so that line stops compiling
// when the struct gains one: the compiler sends whoever added it to the test,
// whose comment says which conversion to extend. The helpers below then fill,
// change and compare every field without naming any.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/location.h"

namespace memd::test {

template <typename T>
struct Fields;  // Specialised per struct, as above.

template <typename T>
concept HasFields = requires(T& value) { Fields<T>::Of(value); };

// Converts to any type; only ever named in unevaluated contexts.
struct AnyField {
  template <typename T>
  operator T() const;
};

// How many fields the aggregate T has: T{a, b, ...} compiles with up to that
// many initializers. For a Fields<T> built from a list other than a
// structured binding (client/src/record_fields.h's tables), so that it too
// stops compiling when T gains a field. AnyField converts to a field's own
// type, so a field that is an aggregate counts once (no brace elision).
template <typename T, typename... Initializers>
constexpr std::size_t AggregateFieldCount() {
  if constexpr (requires { T{Initializers{}..., AnyField{}}; }) {
    return AggregateFieldCount<T, Initializers..., AnyField>();
  } else {
    return sizeof...(Initializers);
  }
}

template <typename T>
struct IsVector : std::false_type {};
template <typename E>
struct IsVector<std::vector<E>> : std::true_type {};
template <typename T>
constexpr bool kIsVectorOfStructs = false;
template <HasFields E>
constexpr bool kIsVectorOfStructs<std::vector<E>> = true;
template <typename T>
struct IsMap : std::false_type {};
template <typename K, typename V>
struct IsMap<std::map<K, V>> : std::true_type {};
// A key no other FillDistinct gives: "k<n>", or n.
template <typename K>
K DistinctKey(int next) {
  if constexpr (std::is_same_v<K, std::string>) {
    return "k" + std::to_string(next);
  } else {
    return static_cast<K>(next);
  }
}
template <typename T>
struct IsOptional : std::false_type {};
template <typename E>
struct IsOptional<std::optional<E>> : std::true_type {};

template <typename T, typename F>
void ForEachField(T& value, F&& f) {
  std::apply([&](auto&... field) { (f(field), ...); }, Fields<std::remove_const_t<T>>::Of(value));
}

template <typename T>
constexpr std::size_t FieldCount() {
  T value{};
  return std::tuple_size_v<decltype(Fields<T>::Of(value))>;
}

// Gives every field (and one element of every vector) a value no other field
// has and none has by default; `next` counts the values handed out.
template <typename T>
void FillDistinct(T& value, int& next) {
  ++next;
  if constexpr (HasFields<T>) {
    ForEachField(value, [&](auto& field) { FillDistinct(field, next); });
  } else if constexpr (IsVector<T>::value) {
    FillDistinct(value.emplace_back(), next);
  } else if constexpr (IsOptional<T>::value) {
    FillDistinct(value.emplace(), next);
  } else if constexpr (IsMap<T>::value) {
    FillDistinct(value[DistinctKey<typename T::key_type>(next)], next);
  } else if constexpr (std::is_same_v<T, std::string>) {
    value = "v" + std::to_string(next);
  } else if constexpr (std::is_same_v<T, bool>) {
    value = !value;
  } else if constexpr (std::is_enum_v<T>) {
    value = static_cast<T>(static_cast<int>(value) + 1);
  } else if constexpr (std::is_floating_point_v<T>) {
    value = next + 0.5;
  } else if constexpr (std::is_integral_v<T>) {
    value = static_cast<T>(next);
  } else if constexpr (std::is_same_v<T, absl::Time>) {
    value = absl::FromUnixSeconds(next);
  } else if constexpr (std::is_same_v<T, absl::Duration>) {
    value = absl::Seconds(next);
  } else if constexpr (std::is_same_v<T, absl::Status>) {
    // A code of its own among 1..16 (never UNKNOWN, which stands for codes
    // a reader does not know), and a message of its own.
    const int code = 3 + next % 14;
    value = absl::Status(static_cast<absl::StatusCode>(code), "v" + std::to_string(next));
  } else if constexpr (std::is_same_v<T, Location>) {
    value = Location::Device(next);
  } else {
    static_assert(sizeof(T) == 0, "teach FillDistinct this type");
  }
}

// Changes one field to another value (a vector: one element more).
template <typename T>
void Perturb(T& value) {
  if constexpr (HasFields<T>) {
    // A struct inside a struct: its first field.
    std::apply([](auto& first, auto&...) { Perturb(first); }, Fields<T>::Of(value));
  } else if constexpr (IsVector<T>::value) {
    value.push_back(value.empty() ? typename T::value_type{} : value.front());
  } else if constexpr (IsOptional<T>::value) {
    value = value.has_value() ? std::nullopt : std::make_optional(absl::UnixEpoch());
  } else if constexpr (IsMap<T>::value) {
    // One entry more (or a value changed), under a key FillDistinct never gives.
    Perturb(value[DistinctKey<typename T::key_type>(1'000'000)]);
  } else if constexpr (std::is_same_v<T, std::string>) {
    value += "'";
  } else if constexpr (std::is_same_v<T, bool>) {
    value = !value;
  } else if constexpr (std::is_enum_v<T>) {
    value = static_cast<T>(static_cast<int>(value) == 0 ? 1 : 0);
  } else if constexpr (std::is_arithmetic_v<T>) {
    value = static_cast<T>(value + 100);
  } else if constexpr (std::is_same_v<T, absl::Time>) {
    value += absl::Seconds(100);
  } else if constexpr (std::is_same_v<T, absl::Duration>) {
    value += absl::Seconds(100);
  } else if constexpr (std::is_same_v<T, absl::Status>) {
    value = absl::Status(value.code(), std::string(value.message()) + "'");
  } else if constexpr (std::is_same_v<T, Location>) {
    value = Location::Device(value.device + 100);
  } else {
    static_assert(sizeof(T) == 0, "teach Perturb this type");
  }
}

template <typename T>
bool Equal(const T& a, const T& b) {
  if constexpr (HasFields<T>) {
    bool equal = true;
    std::apply(
        [&](const auto&... left) {
          std::apply([&](const auto&... right) { equal = (Equal(left, right) && ...); },
                     Fields<T>::Of(b));
        },
        Fields<T>::Of(a));
    return equal;
  } else if constexpr (IsVector<T>::value) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!Equal(a[i], b[i])) return false;
    }
    return true;
  } else {
    return a == b;
  }
}

template <HasFields T>
std::vector<std::string> FieldsLeftDefault(const T& value);

// Adds `here` (and inner positions) to `left` where `field` is still what
// `initial`, the same field of a default-made struct, holds.
template <typename Field>
void CollectLeftDefault(const Field& field, const Field& initial, const std::string& here,
                        std::vector<std::string>& left) {
  if constexpr (kIsVectorOfStructs<Field>) {
    if (field.empty()) {
      left.push_back(here);
      return;
    }
    for (const std::string& inner : FieldsLeftDefault(field.front())) {
      left.push_back(here + "." + inner);
    }
  } else if constexpr (HasFields<Field>) {
    for (const std::string& inner : FieldsLeftDefault(field)) {
      left.push_back(here + "." + inner);
    }
  } else {
    if (Equal(field, initial)) left.push_back(here);
  }
}

// Positions of the fields still at the value a default-made struct gives
// them (a vector: empty, or an element with such a field): what a
// conversion left out. "3" is the fourth field; "5.1" the second field of
// the sixth field's first element.
template <HasFields T>
std::vector<std::string> FieldsLeftDefault(const T& value) {
  const T initial{};
  std::vector<std::string> left;
  std::apply(
      [&](const auto&... fields) {
        std::apply(
            [&](const auto&... initials) {
              std::size_t index = 0;
              (CollectLeftDefault(fields, initials, std::to_string(index++), left), ...);
            },
            Fields<T>::Of(initial));
      },
      Fields<T>::Of(value));
  return left;
}

// Calls f(index, copy, field) once per field of `base`, with a copy whose
// field number `index` (the address `field`, inside the copy) was changed.
template <HasFields T, typename F>
void ForEachPerturbed(const T& base, F&& f) {
  for (std::size_t target = 0; target < FieldCount<T>(); ++target) {
    T copy = base;
    std::size_t index = 0;
    const void* changed = nullptr;
    ForEachField(copy, [&](auto& field) {
      if (index++ != target) return;
      Perturb(field);
      changed = &field;
    });
    f(target, copy, changed);
  }
}

}  // namespace memd::test
