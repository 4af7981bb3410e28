#pragma once

// safetensors files as memd buffers (docs/safetensors.md, the contract
// memctl shares with the Python package memd.safetensors): reading and
// validating a file's header, its fingerprint, and the name and attributes
// of the buffer that holds it. Nothing here talks to the daemon.
//
// A header is hostile until validated: the reader never reads or allocates
// more than the header's length (itself at most kMaxHeaderBytes) and a
// small constant factor of it, whatever the JSON nests or claims.

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace memd::memctl::safetensors {

// The reference implementation's limit on the header's length N.
inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
// The 8 bytes of N in front of the header.
inline constexpr std::uint64_t kLengthBytes = 8;
// Dimensions a shape may have.
inline constexpr std::size_t kMaxDimensions = 32;

struct Tensor {
  std::string name;
  std::string dtype;  // One of the contract's: "F16", "BF16", ...
  std::vector<std::uint64_t> shape;
  // data_offsets: [begin, end) counted from the end of the header; the
  // bytes are at 8 + N + begin in the file (and in the buffer).
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

struct Header {
  std::uint64_t header_bytes = 0;  // N.
  // Ordered by begin, then name (as they lie in the file).
  std::vector<Tensor> tensors;
  std::map<std::string, std::string> metadata;  // __metadata__.

  // Where tensor data starts in the file: 8 + N.
  std::uint64_t data_start() const { return kLengthBytes + header_bytes; }
};

// Bytes per element of `dtype`, 0 for a dtype outside the contract's list.
std::uint64_t ElementBytes(std::string_view dtype);

// N from the first 8 bytes of a file (or buffer) of `total_bytes`.
// Errors: INVALID_ARGUMENT with the numbers: fewer than 8 bytes, N = 0,
// N > kMaxHeaderBytes, 8 + N past `total_bytes`.
absl::StatusOr<std::uint64_t> ParseHeaderLength(std::span<const std::byte> first_bytes,
                                                std::uint64_t total_bytes);

// Parses and validates the N bytes of header `json` of a file of
// `total_bytes` (so N = json.size()). Errors: INVALID_ARGUMENT naming the
// tensor and the numbers, for everything docs/safetensors.md "What a reader
// refuses" lists (not the per-framework checks), also a key given twice and
// JSON nested deeper than the format's three levels (refused as it is read).
absl::StatusOr<Header> ParseHeader(std::string_view json, std::uint64_t total_bytes);

// What the fingerprint takes from stat(2) of the file.
struct FileIdentity {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::uint64_t size = 0;
  // st_mtim and st_ctim as (seconds, nanoseconds).
  std::int64_t mtime_sec = 0;
  std::int64_t mtime_nsec = 0;
  std::int64_t ctime_sec = 0;
  std::int64_t ctime_nsec = 0;

  // st_mtime_ns, st_ctime_ns: seconds * 10^9 + nanoseconds in decimal,
  // exact (as Python's os.stat computes them) even where that passes 64 bits.
  std::string MtimeNs() const;
  std::string CtimeNs() const;

  friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
};

FileIdentity IdentityOf(const struct stat& st);

// SHA-256, 64 lowercase hex digits, of "memd-safetensors-v1\n", then
// "{dev}:{ino}:{size}:{mtime_ns}:{ctime_ns}\n", then the N header bytes.
std::string Fingerprint(const FileIdentity& identity, std::string_view header_json);

// A file's header, validated, and what identifies this state of the file.
struct File {
  std::string path;  // As given.
  FileIdentity identity;
  Header header;
  std::string fingerprint;  // 64 hex digits.
};

// stat(2)s `path` (following symbolic links), reads N and the header
// without blocking (a FIFO is refused, not waited on), validates it and
// fingerprints it. Holds at most the N header bytes in memory. Errors:
// open(2)'s and read(2)'s (NOT_FOUND, PERMISSION_DENIED, ...),
// INVALID_ARGUMENT (not a regular file; anything ParseHeaderLength and
// ParseHeader refuse), ABORTED (the file shrank while being read).
absl::StatusOr<File> ReadFile(const std::string& path);

// After the copy: whether `file` is still what `loaded` described, both
// the file the copy read (`fd`, skipped when negative) and the file `path`
// names now (stat and header again, so a file replaced by rename counts).
// Errors: ABORTED "<path> changed while loading: ...".
absl::Status CheckUnchanged(const File& loaded, int fd);

// "host", "pinned", "device-N" for memd locations "host", "pinned",
// "device:N" (N as the daemon reads it: "device:01" is "device-1").
// Errors: INVALID_ARGUMENT, Location::Parse's.
absl::StatusOr<std::string> Place(std::string_view location);

// "safetensors/<first 32 hex digits of the fingerprint>/<place>".
std::string BufferName(std::string_view fingerprint, std::string_view place);

// The six attributes of the buffer holding `file` (docs/safetensors.md).
std::map<std::string, std::string> Attributes(const File& file);

// `path`'s base name as the safetensors.file attribute holds it: bytes
// outside printable ASCII (0x20-0x7e) become '?', cut to 128 bytes.
std::string FileAttribute(std::string_view path);

// Attribute keys.
inline constexpr char kFormatKey[] = "format";
inline constexpr char kFormatValue[] = "safetensors";
inline constexpr char kFingerprintKey[] = "safetensors.fingerprint";
inline constexpr char kFileSizeKey[] = "safetensors.file_size";
inline constexpr char kMtimeKey[] = "safetensors.mtime_ns";
inline constexpr char kHeaderBytesKey[] = "safetensors.header_bytes";
inline constexpr char kFileKey[] = "safetensors.file";

}  // namespace memd::memctl::safetensors
