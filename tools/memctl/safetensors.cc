#include "tools/memctl/safetensors.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <memory>
#include <set>
#include <sstream>

#include "absl/numeric/int128.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errno_status.h"
#include "common/location.h"
#include "common/unique_fd.h"
#include "nlohmann/json.hpp"

namespace memd::memctl::safetensors {
namespace {

using Json = nlohmann::json;

constexpr char kFingerprintTag[] = "memd-safetensors-v1\n";
constexpr char kMetadataKey[] = "__metadata__";
constexpr std::size_t kMaxFileAttributeBytes = 128;
// Names and texts quoted in messages are cut here: a header may hold
// megabytes of them.
constexpr std::size_t kMaxQuotedBytes = 200;

struct Dtype {
  std::string_view name;
  std::uint64_t bytes;
};
constexpr std::array<Dtype, 15> kDtypes = {{
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"I16", 2}, {"U16", 2},
    {"F16", 2}, {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},
    {"F64", 8}, {"I64", 8}, {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
}};

std::string DtypeList() {
  std::vector<std::string> names;
  for (const Dtype& dtype : kDtypes) names.emplace_back(dtype.name);
  return absl::StrJoin(names, ", ");
}

// `text` in double quotes, escaped for a terminal and cut short.
std::string Quoted(std::string_view text) {
  const bool cut = text.size() > kMaxQuotedBytes;
  const std::string_view shown = text.substr(0, kMaxQuotedBytes);
  return absl::StrCat("\"", absl::CHexEscape(absl::string_view(shown.data(), shown.size())),
                      cut ? "\"..." : "\"");
}

std::string TensorLabel(std::string_view name) { return absl::StrCat("tensor ", Quoted(name)); }

std::string ShapeText(const std::vector<std::uint64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string OffsetsText(const Tensor& tensor) {
  return absl::StrCat("[", tensor.begin, ", ", tensor.end, "]");
}

// Builds tensors and metadata straight from the parser's events (no JSON
// document in between, which could take many times the header's bytes)
// and stops at the first value the format does not allow: the format
// nests three levels deep (header object, tensor object, shape list), so
// hostile nesting ends at the fourth.
class HeaderReader final : public nlohmann::json_sax<Json> {
 public:
  std::vector<Tensor>& tensors() { return tensors_; }
  std::map<std::string, std::string>& metadata() { return metadata_; }
  const absl::Status& error() const { return error_; }

  bool null() override { return Unexpected("null"); }
  bool boolean(bool value) override { return Unexpected(value ? "true" : "false"); }
  bool number_integer(number_integer_t value) override {
    // The parser gives "-0" here: 0 to Python's json, so to memctl too.
    if (value >= 0) return number_unsigned(static_cast<number_unsigned_t>(value));
    return Unexpected(absl::StrCat("the number ", value));
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (where_ == Where::kShape) {
      if (current_.shape.size() == kMaxDimensions) {
        return Fail(absl::StrCat(TensorLabel(current_.name), ": shape has more than ",
                                 kMaxDimensions, " dimensions"));
      }
      current_.shape.push_back(value);
      return true;
    }
    if (where_ == Where::kOffsets) {
      if (offsets_.size() == 2) return Fail(OffsetsCountError(3));
      offsets_.push_back(value);
      return true;
    }
    return Unexpected(absl::StrCat("the number ", value));
  }
  bool number_float(number_float_t, const string_t& text) override {
    return Unexpected(absl::StrCat("the number ", Quoted(text)));
  }
  bool string(string_t& value) override {
    if (where_ == Where::kTensor && field_ == "dtype") {
      current_.dtype = std::move(value);
      return true;
    }
    if (where_ == Where::kMetadata) {
      metadata_.insert_or_assign(field_, std::move(value));
      return true;
    }
    return Unexpected(absl::StrCat("the string ", Quoted(value)));
  }
  bool binary(binary_t&) override { return Unexpected("binary"); }

  bool start_object(std::size_t) override {
    switch (where_) {
      case Where::kTop:
        where_ = Where::kRoot;
        return true;
      case Where::kRoot:
        if (key_ == kMetadataKey) {
          where_ = Where::kMetadata;
          return true;
        }
        where_ = Where::kTensor;
        current_ = Tensor();
        current_.name = key_;
        seen_fields_.clear();
        return true;
      default:
        return Unexpected("an object");
    }
  }
  bool key(string_t& key) override {
    switch (where_) {
      case Where::kRoot:
        if (key == kMetadataKey ? seen_metadata_ : !names_.insert(key).second) {
          return Fail(absl::StrCat("the header names ", Quoted(key), " twice"));
        }
        if (key == kMetadataKey) seen_metadata_ = true;
        key_ = std::move(key);
        return true;
      case Where::kTensor:
        if (key != "dtype" && key != "shape" && key != "data_offsets") {
          return Fail(absl::StrCat(TensorLabel(current_.name), ": unknown key ", Quoted(key),
                                   " (a tensor has exactly dtype, shape, data_offsets)"));
        }
        if (!seen_fields_.insert(key).second) {
          return Fail(absl::StrCat(TensorLabel(current_.name), ": ", key, " is given twice"));
        }
        field_ = std::move(key);
        return true;
      case Where::kMetadata:
        if (metadata_.contains(key)) {
          return Fail(absl::StrCat(kMetadataKey, ": ", Quoted(key), " is given twice"));
        }
        field_ = std::move(key);
        return true;
      default:
        return Fail("unexpected key");  // The parser gives keys only in objects.
    }
  }
  bool end_object() override {
    switch (where_) {
      case Where::kRoot:
        where_ = Where::kDone;
        return true;
      case Where::kTensor:
        for (const char* field : {"dtype", "shape", "data_offsets"}) {
          if (!seen_fields_.contains(field)) {
            return Fail(absl::StrCat(TensorLabel(current_.name), ": no ", field,
                                     " (a tensor has exactly dtype, shape, data_offsets)"));
          }
        }
        tensors_.push_back(std::move(current_));
        where_ = Where::kRoot;
        return true;
      case Where::kMetadata:
        where_ = Where::kRoot;
        return true;
      default:
        return Fail("unexpected end of object");
    }
  }
  bool start_array(std::size_t) override {
    if (where_ == Where::kTensor && field_ == "shape") {
      where_ = Where::kShape;
      return true;
    }
    if (where_ == Where::kTensor && field_ == "data_offsets") {
      where_ = Where::kOffsets;
      offsets_.clear();
      return true;
    }
    return Unexpected("a list");
  }
  bool end_array() override {
    if (where_ == Where::kShape) {
      where_ = Where::kTensor;
      return true;
    }
    if (where_ == Where::kOffsets) {
      if (offsets_.size() != 2) return Fail(OffsetsCountError(offsets_.size()));
      current_.begin = offsets_[0];
      current_.end = offsets_[1];
      where_ = Where::kTensor;
      return true;
    }
    return Fail("unexpected end of list");
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    // e.what() quotes what the parser last read: escape it.
    std::string what = e.what();
    if (what.size() > 2 * kMaxQuotedBytes) what.resize(2 * kMaxQuotedBytes);
    return Fail(absl::StrCat("the header is not valid JSON (at byte ", position,
                             " of it): ", absl::CHexEscape(what)));
  }

 private:
  enum class Where { kTop, kRoot, kTensor, kShape, kOffsets, kMetadata, kDone };

  bool Fail(std::string message) {
    if (error_.ok()) error_ = absl::InvalidArgumentError(std::move(message));
    return false;
  }

  std::string OffsetsCountError(std::size_t count) const {
    return absl::StrCat(TensorLabel(current_.name), ": data_offsets has ",
                        count > 2 ? "more than 2" : absl::StrCat(count),
                        " values, not two integers");
  }

  // `what` ("null", "an object", "the number -1") where the format has no
  // place for it.
  bool Unexpected(const std::string& what) {
    const std::string tensor = TensorLabel(current_.name);
    switch (where_) {
      case Where::kTop:
        return Fail(absl::StrCat("the header is ", what, ", not a JSON object"));
      case Where::kRoot:
        if (key_ == kMetadataKey) {
          return Fail(absl::StrCat(kMetadataKey, " is ", what, ", not an object of strings"));
        }
        return Fail(absl::StrCat(TensorLabel(key_), " is ", what, ", not an object"));
      case Where::kTensor:
        if (field_ == "dtype") {
          return Fail(absl::StrCat(tensor, ": dtype is ", what, ", not a string"));
        }
        if (field_ == "shape") {
          return Fail(absl::StrCat(tensor, ": shape is ", what,
                                   ", not a list of non-negative integers"));
        }
        return Fail(absl::StrCat(tensor, ": data_offsets is ", what, ", not two integers"));
      case Where::kShape:
        return Fail(absl::StrCat(tensor, ": shape holds ", what,
                                 ", not a non-negative integer"));
      case Where::kOffsets:
        return Fail(absl::StrCat(tensor, ": data_offsets holds ", what,
                                 ", not a non-negative integer"));
      case Where::kMetadata:
        return Fail(absl::StrCat(kMetadataKey, ": the value of ", Quoted(field_), " is ",
                                 what, ", not a string"));
      case Where::kDone:
        break;
    }
    return Fail(absl::StrCat(what, " after the header's object"));
  }

  Where where_ = Where::kTop;
  std::string key_;    // The header's key being read (a tensor's name).
  std::string field_;  // The tensor's or __metadata__'s key being read.
  Tensor current_;
  std::set<std::string> seen_fields_;
  std::vector<std::uint64_t> offsets_;
  std::set<std::string> names_;
  bool seen_metadata_ = false;
  std::vector<Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
  absl::Status error_;
};

// The tensor's byte length from its dtype and shape. The element count is
// the mathematical product (a 0 anywhere makes it 0, however large the
// rest); only a product of bytes that needs more than 64 bits is refused.
absl::StatusOr<std::uint64_t> TensorBytes(const Tensor& tensor) {
  const std::uint64_t element_bytes = ElementBytes(tensor.dtype);
  if (element_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(TensorLabel(tensor.name), ": dtype ",
                                                   Quoted(tensor.dtype), " is none of ",
                                                   DtypeList()));
  }
  if (std::find(tensor.shape.begin(), tensor.shape.end(), 0) != tensor.shape.end()) return 0;
  absl::uint128 bytes = element_bytes;
  for (std::uint64_t dimension : tensor.shape) {
    bytes *= dimension;
    if (absl::Uint128High64(bytes) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          TensorLabel(tensor.name), ": shape ", ShapeText(tensor.shape), " of ", tensor.dtype,
          " has more than 2^64 bytes"));
    }
  }
  return absl::Uint128Low64(bytes);
}

std::string NanosText(std::int64_t seconds, std::int64_t nanoseconds) {
  std::ostringstream text;
  text << absl::int128(seconds) * 1'000'000'000 + nanoseconds;
  return text.str();
}

std::string Hex(const unsigned char* bytes, std::size_t count) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), count));
}

// Reads exactly `into.size()` bytes at `offset`. ABORTED when the file
// ends first: it was longer when fstat looked.
absl::Status ReadAt(int fd, std::uint64_t offset, std::span<char> into,
                    const std::string& path) {
  std::size_t done = 0;
  while (done < into.size()) {
    const ssize_t got = ::pread(fd, into.data() + done, into.size() - done,
                                static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(absl::StrCat("read ", path), errno);
    }
    if (got == 0) {
      return absl::AbortedError(absl::StrCat(path, " ended at byte ", offset + done,
                                             " while its header was read: it is changing"));
    }
    done += static_cast<std::size_t>(got);
  }
  return absl::OkStatus();
}

struct RawFile {
  FileIdentity identity;
  std::string header_json;
};

// Opens `path` without blocking, checks it is a regular file and reads its
// N header bytes.
absl::StatusOr<RawFile> ReadRaw(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd) return ErrnoStatus(absl::StrCat("open ", path), errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(absl::StrCat("stat ", path), errno);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a regular file: a safetensors file is read twice "
                           "(header, then all of it) and fingerprinted by its stat"));
  }
  RawFile raw;
  raw.identity = IdentityOf(st);
  std::array<char, kLengthBytes> length_bytes{};
  const std::uint64_t size = raw.identity.size;
  std::span<char> first(length_bytes.data(), std::min<std::uint64_t>(size, kLengthBytes));
  if (absl::Status read = ReadAt(fd.get(), 0, first, path); !read.ok()) return read;
  absl::StatusOr<std::uint64_t> header_bytes =
      ParseHeaderLength(std::as_bytes(first), size);
  if (!header_bytes.ok()) {
    return absl::Status(header_bytes.status().code(),
                        absl::StrCat(path, ": ", header_bytes.status().message()));
  }
  // Bounded: at most kMaxHeaderBytes, and no more than the file holds.
  raw.header_json.resize(*header_bytes);
  if (absl::Status read = ReadAt(fd.get(), kLengthBytes, std::span(raw.header_json), path);
      !read.ok()) {
    return read;
  }
  return raw;
}

}  // namespace

std::uint64_t ElementBytes(std::string_view dtype) {
  for (const Dtype& known : kDtypes) {
    if (known.name == dtype) return known.bytes;
  }
  return 0;
}

absl::StatusOr<std::uint64_t> ParseHeaderLength(std::span<const std::byte> first_bytes,
                                                std::uint64_t total_bytes) {
  if (total_bytes < kLengthBytes || first_bytes.size() < kLengthBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "it has ", std::min<std::uint64_t>(total_bytes, first_bytes.size()),
        " bytes, fewer than the 8 of a safetensors header's length"));
  }
  std::uint64_t length = 0;
  for (std::size_t i = 0; i < kLengthBytes; ++i) {
    length |= static_cast<std::uint64_t>(first_bytes[i]) << (8 * i);
  }
  if (length == 0) {
    return absl::InvalidArgumentError("its header length is 0: no safetensors header");
  }
  if (length > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("its header length ", length,
                                                   " is over the limit of ", kMaxHeaderBytes,
                                                   " bytes"));
  }
  if (length > total_bytes - kLengthBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "its header length ", length, " runs past its end: 8 + ", length, " > ", total_bytes,
        " bytes"));
  }
  return length;
}

absl::StatusOr<Header> ParseHeader(std::string_view json, std::uint64_t total_bytes) {
  Header header;
  header.header_bytes = json.size();
  if (json.empty() || json.size() > kMaxHeaderBytes ||
      header.data_start() > total_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("a header of ", json.size(),
                                                   " bytes in ", total_bytes, " bytes"));
  }
  const std::uint64_t data_bytes = total_bytes - header.data_start();
  // nlohmann's parser ends its input at a NUL byte, where Python's json
  // refuses what follows; no JSON holds one outside a string's \u0000.
  if (const std::size_t nul = json.find('\0'); nul != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the header is not valid JSON: a NUL byte at byte ", nul, " of it"));
  }
  HeaderReader reader;
  bool parsed = false;
  try {
    parsed = Json::sax_parse(json.begin(), json.end(), &reader);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("the header is not valid JSON: ", absl::CHexEscape(e.what())));
  }
  if (!reader.error().ok()) return reader.error();
  if (!parsed) return absl::InvalidArgumentError("the header is not valid JSON");
  header.tensors = std::move(reader.tensors());
  header.metadata = std::move(reader.metadata());

  for (const Tensor& tensor : header.tensors) {
    absl::StatusOr<std::uint64_t> bytes = TensorBytes(tensor);
    if (!bytes.ok()) return bytes.status();
    const std::string label = TensorLabel(tensor.name);
    if (tensor.begin > tensor.end) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": data_offsets ", OffsetsText(tensor), " begin after they end"));
    }
    if (tensor.end > data_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": data_offsets ", OffsetsText(tensor), " end past the data: ",
                       data_bytes, " bytes follow the header"));
    }
    if (tensor.end - tensor.begin != *bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": data_offsets ", OffsetsText(tensor), " hold ", tensor.end - tensor.begin,
          " bytes, but ", tensor.dtype, " ", ShapeText(tensor.shape), " takes ", *bytes));
    }
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const Tensor& a, const Tensor& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.name < b.name;
            });
  // Sorted by begin: a tensor overlaps an earlier one exactly when it
  // begins before the furthest end so far. Empty tensors overlap nothing.
  const Tensor* furthest = nullptr;
  for (const Tensor& tensor : header.tensors) {
    if (tensor.begin == tensor.end) continue;
    if (furthest != nullptr && tensor.begin < furthest->end) {
      return absl::InvalidArgumentError(absl::StrCat(
          TensorLabel(furthest->name), " ", OffsetsText(*furthest), " and ",
          TensorLabel(tensor.name), " ", OffsetsText(tensor), " overlap"));
    }
    if (furthest == nullptr || tensor.end > furthest->end) furthest = &tensor;
  }
  return header;
}

std::string FileIdentity::MtimeNs() const { return NanosText(mtime_sec, mtime_nsec); }
std::string FileIdentity::CtimeNs() const { return NanosText(ctime_sec, ctime_nsec); }

FileIdentity IdentityOf(const struct stat& st) {
  FileIdentity identity;
  identity.dev = static_cast<std::uint64_t>(st.st_dev);
  identity.ino = static_cast<std::uint64_t>(st.st_ino);
  identity.size = static_cast<std::uint64_t>(st.st_size);
  identity.mtime_sec = st.st_mtim.tv_sec;
  identity.mtime_nsec = st.st_mtim.tv_nsec;
  identity.ctime_sec = st.st_ctim.tv_sec;
  identity.ctime_nsec = st.st_ctim.tv_nsec;
  return identity;
}

std::string Fingerprint(const FileIdentity& identity, std::string_view header_json) {
  const std::string stat_line =
      absl::StrCat(identity.dev, ":", identity.ino, ":", identity.size, ":",
                   identity.MtimeNs(), ":", identity.CtimeNs(), "\n");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                  &EVP_MD_CTX_free);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // SHA-256 fails only when memory is short; an empty fingerprint then
  // matches no buffer's and names none (callers check for it).
  if (context == nullptr || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(context.get(), kFingerprintTag, sizeof(kFingerprintTag) - 1) != 1 ||
      EVP_DigestUpdate(context.get(), stat_line.data(), stat_line.size()) != 1 ||
      EVP_DigestUpdate(context.get(), header_json.data(), header_json.size()) != 1 ||
      EVP_DigestFinal_ex(context.get(), digest, &length) != 1) {
    return "";
  }
  return Hex(digest, length);
}

absl::StatusOr<File> ReadFile(const std::string& path) {
  absl::StatusOr<RawFile> raw = ReadRaw(path);
  if (!raw.ok()) return raw.status();
  absl::StatusOr<Header> header = ParseHeader(raw->header_json, raw->identity.size);
  if (!header.ok()) {
    return absl::Status(header.status().code(),
                        absl::StrCat(path, ": ", header.status().message()));
  }
  File file;
  file.path = path;
  file.identity = raw->identity;
  file.header = *std::move(header);
  file.fingerprint = Fingerprint(raw->identity, raw->header_json);
  if (file.fingerprint.empty()) {
    return absl::ResourceExhaustedError(absl::StrCat("SHA-256 of ", path, "'s header failed"));
  }
  return file;
}

absl::Status CheckUnchanged(const File& loaded, int fd) {
  auto changed = [&](const std::string& how) {
    return absl::AbortedError(absl::StrCat(loaded.path, " changed while loading: ", how,
                                           "; the buffer is dropped unsealed"));
  };
  if (fd >= 0) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return ErrnoStatus(absl::StrCat("stat ", loaded.path), errno);
    const FileIdentity now = IdentityOf(st);
    if (now != loaded.identity) {
      return changed(absl::StrCat("the file read was ", now.size, " bytes, mtime_ns ",
                                  now.MtimeNs(), ", ctime_ns ", now.CtimeNs(), " at the end, ",
                                  loaded.identity.size, ", ", loaded.identity.MtimeNs(), ", ",
                                  loaded.identity.CtimeNs(), " at the start"));
    }
  }
  absl::StatusOr<RawFile> raw = ReadRaw(loaded.path);
  if (!raw.ok()) return changed(absl::StrCat("reading it again: ", raw.status().ToString()));
  const std::string fingerprint = Fingerprint(raw->identity, raw->header_json);
  if (fingerprint != loaded.fingerprint) {
    return changed(absl::StrCat("its fingerprint is now ", fingerprint, ", not ",
                                loaded.fingerprint));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Place(std::string_view location) {
  absl::StatusOr<Location> parsed = Location::Parse(location);
  if (!parsed.ok()) return parsed.status();
  switch (parsed->kind) {
    case Location::Kind::kHost:
      return std::string("host");
    case Location::Kind::kPinned:
      return std::string("pinned");
    case Location::Kind::kDevice:
      return absl::StrCat("device-", parsed->device);
  }
  return absl::InvalidArgumentError("unknown location kind");
}

std::string BufferName(std::string_view fingerprint, std::string_view place) {
  const std::string_view prefix = fingerprint.substr(0, 32);
  return absl::StrCat("safetensors/", absl::string_view(prefix.data(), prefix.size()), "/",
                      absl::string_view(place.data(), place.size()));
}

std::map<std::string, std::string> Attributes(const File& file) {
  return {
      {kFormatKey, kFormatValue},
      {kFingerprintKey, file.fingerprint},
      {kFileSizeKey, absl::StrCat(file.identity.size)},
      {kMtimeKey, file.identity.MtimeNs()},
      {kHeaderBytesKey, absl::StrCat(file.header.header_bytes)},
      {kFileKey, FileAttribute(file.path)},
  };
}

std::string FileAttribute(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  std::string base(slash == std::string_view::npos ? path : path.substr(slash + 1));
  if (base.size() > kMaxFileAttributeBytes) base.resize(kMaxFileAttributeBytes);
  for (char& c : base) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte > 0x7e) c = '?';
  }
  return base;
}

}  // namespace memd::memctl::safetensors
