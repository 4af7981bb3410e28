// The safetensors reader memctl uses (tools/memctl/safetensors.h) against
// docs/safetensors.md: what it parses, everything a reader refuses (with
// hostile headers that must not crash, hang or allocate their claims), the
// fingerprint (a known answer the Python package can be checked against),
// the buffer's name and its six attributes.

#include "tools/memctl/safetensors.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace memd::memctl::safetensors {
namespace {

using ::memd::test::TempDir;
using ::memd::test::WriteWholeFile;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// N as 8 little-endian bytes.
std::string LengthBytes(std::uint64_t length) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  return bytes;
}

// A file: N, the header, then the data.
std::string FileBytes(const std::string& header, const std::string& data) {
  return LengthBytes(header.size()) + header + data;
}

absl::StatusOr<Header> Parse(const std::string& header, std::uint64_t data_bytes) {
  return ParseHeader(header, kLengthBytes + header.size() + data_bytes);
}

// INVALID_ARGUMENT whose message holds every one of `parts`.
void ExpectRefused(const absl::StatusOr<Header>& header,
                   const std::vector<std::string>& parts) {
  ASSERT_FALSE(header.ok()) << "accepted";
  EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument) << header.status();
  for (const std::string& part : parts) {
    EXPECT_THAT(std::string(header.status().message()), HasSubstr(part));
  }
}

void ExpectRefused(const std::string& header, std::uint64_t data_bytes,
                   const std::vector<std::string>& parts) {
  SCOPED_TRACE(header.substr(0, 200));
  ExpectRefused(Parse(header, data_bytes), parts);
}

// One tensor entry.
std::string Entry(const std::string& dtype, const std::string& shape, std::uint64_t begin,
                  std::uint64_t end) {
  return absl::StrCat(R"({"dtype":")", dtype, R"(","shape":)", shape,
                      R"(,"data_offsets":[)", begin, ",", end, "]}");
}

TEST(SafetensorsHeaderTest, ParsesTensorsByOffsetAndMetadata) {
  const std::string header = absl::StrCat(
      R"({"b":)", Entry("F32", "[2,2]", 8, 24), R"(,"a":)", Entry("F16", "[4]", 0, 8),
      R"(,"__metadata__":{"format":"pt","note":"x"},"empty":)", Entry("I64", "[0,5]", 24, 24),
      "}     ");
  absl::StatusOr<Header> parsed = Parse(header, 24);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->header_bytes, header.size());
  EXPECT_EQ(parsed->data_start(), 8 + header.size());
  ASSERT_EQ(parsed->tensors.size(), 3u);
  EXPECT_EQ(parsed->tensors[0].name, "a");
  EXPECT_EQ(parsed->tensors[0].dtype, "F16");
  EXPECT_THAT(parsed->tensors[0].shape, ElementsAre(4));
  EXPECT_EQ(parsed->tensors[0].begin, 0u);
  EXPECT_EQ(parsed->tensors[0].end, 8u);
  EXPECT_EQ(parsed->tensors[1].name, "b");
  EXPECT_THAT(parsed->tensors[1].shape, ElementsAre(2, 2));
  EXPECT_EQ(parsed->tensors[2].name, "empty");
  EXPECT_THAT(parsed->metadata, ElementsAre(Pair("format", "pt"), Pair("note", "x")));
}

TEST(SafetensorsHeaderTest, AcceptsEveryDtypeOfTheContractWithItsSize) {
  const std::vector<std::pair<std::string, std::uint64_t>> dtypes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"I16", 2}, {"U16", 2},
      {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},
      {"F64", 8},  {"I64", 8}, {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  for (const auto& [dtype, size] : dtypes) {
    EXPECT_EQ(ElementBytes(dtype), size) << dtype;
    absl::StatusOr<Header> parsed =
        Parse(absl::StrCat(R"({"t":)", Entry(dtype, "[3]", 0, 3 * size), "}"), 3 * size);
    EXPECT_TRUE(parsed.ok()) << dtype << ": " << parsed.status();
  }
  EXPECT_EQ(ElementBytes("F128"), 0u);
  EXPECT_EQ(ElementBytes("f16"), 0u) << "dtypes are case-sensitive";
}

TEST(SafetensorsHeaderTest, EmptyHeaderObjectHasNoTensors) {
  absl::StatusOr<Header> parsed = Parse("{}", 0);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->tensors.empty());
  EXPECT_TRUE(parsed->metadata.empty());
}

TEST(SafetensorsHeaderTest, RefusesAHeaderLengthOfZeroOverTheLimitOrPastTheEnd) {
  auto length = [](std::uint64_t n, std::uint64_t total) {
    const std::string bytes = LengthBytes(n);
    return ParseHeaderLength(std::as_bytes(std::span(bytes.data(), bytes.size())), total);
  };
  EXPECT_EQ(*length(5, 13), 5u);
  EXPECT_THAT(std::string(length(0, 100).status().message()), HasSubstr("header length is 0"));
  EXPECT_THAT(std::string(length(kMaxHeaderBytes + 1, ~std::uint64_t{0}).status().message()),
              AllOf(HasSubstr("100000001"), HasSubstr("100000000")));
  EXPECT_EQ(*length(kMaxHeaderBytes, kMaxHeaderBytes + 8), kMaxHeaderBytes);
  EXPECT_THAT(std::string(length(6, 13).status().message()),
              AllOf(HasSubstr("past its end"), HasSubstr("6"), HasSubstr("13")));
  // N near 2^64 must not wrap around when added to 8.
  EXPECT_FALSE(length(~std::uint64_t{0} - 3, 100).ok());
  const std::string seven = "1234567";
  absl::StatusOr<std::uint64_t> short_file =
      ParseHeaderLength(std::as_bytes(std::span(seven.data(), seven.size())), 7);
  EXPECT_EQ(short_file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(short_file.status().message()), HasSubstr("7 bytes"));
}

TEST(SafetensorsHeaderTest, RefusesHeadersThatAreNoObjectOfObjects) {
  ExpectRefused("[]", 0, {"the header is a list, not a JSON object"});
  ExpectRefused("3", 0, {"the header is the number 3"});
  ExpectRefused(R"("x")", 0, {"the header is the string"});
  ExpectRefused("null", 0, {"not a JSON object"});
  ExpectRefused(R"({"w":3})", 0, {"tensor \"w\" is the number 3, not an object"});
  ExpectRefused(R"({"w":[1]})", 0, {"tensor \"w\" is a list, not an object"});
  ExpectRefused(R"({"w":null})", 0, {"tensor \"w\""});
  ExpectRefused("{", 0, {"not valid JSON"});
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("U8", "[1]", 0, 1), "} x"), 1,
                {"not valid JSON"});
  // nlohmann's parser would take a NUL for the end of the input; Python's
  // json refuses what follows, and so must memctl.
  ExpectRefused(std::string("{}\0", 3), 0, {"not valid JSON", "NUL"});
  ExpectRefused(std::string("{} \0 {\"x\":1}", 11), 0, {"not valid JSON"});
  ExpectRefused("\xff\xfe{}", 0, {"not valid JSON"});
  ExpectRefused(R"({"\ud800":{}})", 0, {"not valid JSON"});
}

TEST(SafetensorsHeaderTest, RefusesTensorsWithoutExactlyTheThreeKeys) {
  ExpectRefused(R"({"w":{"dtype":"F32","shape":[1]}})", 4, {"tensor \"w\": no data_offsets"});
  ExpectRefused(R"({"w":{}})", 0, {"tensor \"w\": no dtype"});
  ExpectRefused(absl::StrCat(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],)"
                             R"("extra":1}})"),
                4, {"tensor \"w\": unknown key \"extra\""});
  ExpectRefused(R"({"w":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})", 4,
                {"tensor \"w\": dtype is given twice"});
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("U8", "[1]", 0, 1), R"(,"w":)",
                             Entry("U8", "[1]", 1, 2), "}"),
                2, {"names \"w\" twice"});
  ExpectRefused(R"({"__metadata__":{},"__metadata__":{}})", 0, {"\"__metadata__\" twice"});
}

TEST(SafetensorsHeaderTest, RefusesMetadataThatIsNotAnObjectOfStrings) {
  ExpectRefused(R"({"__metadata__":{"n":1}})", 0,
                {"__metadata__: the value of \"n\" is the number 1, not a string"});
  ExpectRefused(R"({"__metadata__":{"n":{"deeper":"x"}}})", 0,
                {"value of \"n\" is an object, not a string"});
  ExpectRefused(R"({"__metadata__":{"n":["x"]}})", 0, {"value of \"n\" is a list"});
  ExpectRefused(R"({"__metadata__":{"n":null}})", 0, {"value of \"n\" is null"});
  ExpectRefused(R"({"__metadata__":{"n":true}})", 0, {"value of \"n\" is true"});
  ExpectRefused(R"({"__metadata__":["x"]})", 0, {"__metadata__ is a list, not an object"});
  ExpectRefused(R"({"__metadata__":"x"})", 0, {"__metadata__ is the string"});
  ExpectRefused(R"({"__metadata__":{"n":"a","n":"b"}})", 0, {"\"n\" is given twice"});
}

TEST(SafetensorsHeaderTest, RefusesUnknownDtypesNamingTheTensor) {
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("F128", "[1]", 0, 16), "}"), 16,
                {"tensor \"w\": dtype \"F128\" is none of BOOL, U8", "F8_E5M2"});
  ExpectRefused(R"({"w":{"dtype":7,"shape":[1],"data_offsets":[0,1]}})", 1,
                {"tensor \"w\": dtype is the number 7, not a string"});
}

TEST(SafetensorsHeaderTest, RefusesShapesThatAreNoListOfNonNegativeIntegers) {
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("F32", "[-1]", 0, 4), "}"), 4,
                {"tensor \"w\": shape holds the number -1, not a non-negative integer"});
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("F32", "[1.0]", 0, 4), "}"), 4,
                {"shape holds the number \"1.0\""});
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("F32", "[1e2]", 0, 400), "}"), 400,
                {"shape holds the number \"1e2\""});
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("F32", R"(["1"])", 0, 4), "}"), 4,
                {"shape holds the string \"1\""});
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("F32", "[[1]]", 0, 4), "}"), 4,
                {"shape holds a list"});
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("F32", "4", 0, 16), "}"), 16,
                {"shape is the number 4, not a list"});
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("F32", "[18446744073709551616]", 0, 4), "}"),
                4, {"18446744073709551616"});
  // 33 dimensions of 1.
  std::string shape = "[1";
  for (int i = 1; i < 33; ++i) shape += ",1";
  shape += "]";
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("U8", shape, 0, 1), "}"), 1,
                {"more than 32 dimensions"});
  // 32 are fine; "-0" is 0, as Python's json reads it.
  shape.resize(shape.size() - 3);
  EXPECT_TRUE(Parse(absl::StrCat(R"({"w":)", Entry("U8", shape + "]", 0, 1), "}"), 1).ok());
  EXPECT_TRUE(Parse(absl::StrCat(R"({"w":)", Entry("U8", "[-0]", 0, 0), "}"), 0).ok());
}

TEST(SafetensorsHeaderTest, RefusesAShapeWhoseBytesOverflowSixtyFourBits) {
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("F32", "[4294967296,4294967296]", 0, 0), "}"),
                0, {"tensor \"w\": shape [4294967296, 4294967296] of F32",
                    "more than 2^64 bytes"});
  // 2^62 elements fit, 2^62 x 4 bytes does not.
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("F32", "[4611686018427387904]", 0, 0), "}"), 0,
                {"more than 2^64 bytes"});
  // Zero elements, however large the other dimensions: 0 bytes.
  EXPECT_TRUE(Parse(absl::StrCat(R"({"w":)",
                                 Entry("F64", "[4294967296,4294967296,0]", 0, 0), "}"),
                    0)
                  .ok());
}

TEST(SafetensorsHeaderTest, RefusesDataOffsetsThatAreNotTwoIntegersInOrderWithinTheData) {
  ExpectRefused(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1,
                {"tensor \"w\": data_offsets has 1 values, not two integers"});
  ExpectRefused(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", 2,
                {"data_offsets has more than 2 values"});
  ExpectRefused(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,-1]}})", 1,
                {"data_offsets holds the number -1"});
  ExpectRefused(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":"0,1"}})", 1,
                {"data_offsets is the string"});
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("U8", "[0]", 5, 4), "}"), 8,
                {"tensor \"w\": data_offsets [5, 4] begin after they end"});
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("U8", "[4]", 8, 12), "}"), 10,
                {"tensor \"w\": data_offsets [8, 12] end past the data: 10 bytes"});
  ExpectRefused(absl::StrCat(R"({"w":)",
                             Entry("U8", "[1]", 18446744073709551615ull,
                                   18446744073709551615ull),
                             "}"),
                10, {"end past the data"});
  ExpectRefused(absl::StrCat(R"({"w":)", Entry("F16", "[3]", 0, 4), "}"), 8,
                {"tensor \"w\": data_offsets [0, 4] hold 4 bytes, but F16 [3] takes 6"});
}

TEST(SafetensorsHeaderTest, RefusesOverlappingTensorsButNotEmptyOnes) {
  ExpectRefused(absl::StrCat(R"({"a":)", Entry("U8", "[8]", 0, 8), R"(,"b":)",
                             Entry("U8", "[4]", 6, 10), "}"),
                10, {"tensor \"a\" [0, 8] and tensor \"b\" [6, 10] overlap"});
  // A tensor inside another.
  ExpectRefused(absl::StrCat(R"({"a":)", Entry("U8", "[8]", 0, 8), R"(,"b":)",
                             Entry("U8", "[1]", 2, 3), R"(,"c":)", Entry("U8", "[1]", 4, 5),
                             "}"),
                8, {"overlap"});
  ExpectRefused(absl::StrCat(R"({"a":)", Entry("U8", "[4]", 0, 4), R"(,"b":)",
                             Entry("U8", "[4]", 0, 4), "}"),
                4, {"overlap"});
  EXPECT_TRUE(Parse(absl::StrCat(R"({"a":)", Entry("U8", "[4]", 0, 4), R"(,"b":)",
                                 Entry("U8", "[0]", 2, 2), R"(,"c":)",
                                 Entry("U8", "[4]", 4, 8), "}"),
                    8)
                  .ok());
}

// Hostile nesting is refused at the fourth level, as it is read: a megabyte
// of '[' must neither recurse nor build a document.
TEST(SafetensorsHeaderTest, RefusesDeepNestingWithoutBuildingIt) {
  const std::string deep(1 << 20, '[');
  ExpectRefused(deep, 0, {"the header is a list"});
  ExpectRefused(absl::StrCat(R"({"w":{"dtype":"U8","shape":)", deep), 0,
                {"tensor \"w\": shape holds a list"});
  ExpectRefused(absl::StrCat(R"({"__metadata__":{"k":)", std::string(1 << 20, '{')), 0,
                {"__metadata__: the value of \"k\" is an object"});
  ExpectRefused(absl::StrCat(R"({"w":{"dtype":)", deep), 0,
                {"tensor \"w\": dtype is a list"});
}

TEST(SafetensorsHeaderTest, MessagesEscapeAndCutHostileNames) {
  const std::string name = absl::StrCat("\x1b[31m", std::string(10000, 'n'));
  absl::StatusOr<Header> parsed =
      Parse(absl::StrCat(R"({")", "\\u001b[31m", std::string(10000, 'n'), R"(":)",
                         Entry("X", "[1]", 0, 1), "}"),
            1);
  ASSERT_FALSE(parsed.ok());
  const std::string message(parsed.status().message());
  EXPECT_THAT(message, HasSubstr("\\x1b[31m"));
  EXPECT_EQ(message.find('\x1b'), std::string::npos);
  EXPECT_LT(message.size(), 600u);
}

class SafetensorsFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_.Join(name);
    WriteWholeFile(path, bytes);
    return path;
  }

  // A small valid file: two tensors and metadata.
  std::string WriteModel(const std::string& name = "model.safetensors") {
    return Write(name, FileBytes(kHeader, std::string(24, '\x7f')));
  }

  static void SetTimes(const std::string& path, std::int64_t sec, long nsec) {
    const struct timespec times[2] = {{sec, nsec}, {sec, nsec}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
  }

  static constexpr char kHeader[] =
      R"({"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]},)"
      R"("__metadata__":{"format":"pt"}})";

  TempDir dir_;
};

// The fingerprint's formula on fixed inputs: the Python package
// (memd.safetensors) must give this same digest for the same stat fields
// and header. Computed independently with
//   printf 'memd-safetensors-v1\n2049:1234567:200:1700000000123456789:1700000001987654321\n{"__metadata__":{"format":"pt"}}' | sha256sum
TEST_F(SafetensorsFileTest, FingerprintOfFixedInputsIsTheKnownAnswer) {
  FileIdentity identity;
  identity.dev = 2049;
  identity.ino = 1234567;
  identity.size = 200;
  identity.mtime_sec = 1700000000;
  identity.mtime_nsec = 123456789;
  identity.ctime_sec = 1700000001;
  identity.ctime_nsec = 987654321;
  EXPECT_EQ(identity.MtimeNs(), "1700000000123456789");
  EXPECT_EQ(identity.CtimeNs(), "1700000001987654321");
  EXPECT_EQ(Fingerprint(identity, R"({"__metadata__":{"format":"pt"}})"),
            "f4cb6f4407948fbc177b84e396800776b5ee91e2f9dd97c5d6f08865bc19a7c9");
}

TEST_F(SafetensorsFileTest, NanosecondTimesAreExactBeyondSixtyFourBitsAndBeforeTheEpoch) {
  FileIdentity identity;
  identity.mtime_sec = -1;
  identity.mtime_nsec = 500000000;
  EXPECT_EQ(identity.MtimeNs(), "-500000000");
  identity.mtime_sec = std::int64_t{1} << 40;
  identity.mtime_nsec = 1;
  EXPECT_EQ(identity.MtimeNs(), "1099511627776000000001");
}

// A real file with a fixed mtime: the fingerprint is the formula of
// docs/safetensors.md over the file's own stat fields and header bytes,
// computed here without the reader.
TEST_F(SafetensorsFileTest, FingerprintOfAFileFollowsTheDocumentedFormula) {
  const std::string path = WriteModel();
  SetTimes(path, 1700000000, 123456789);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  ASSERT_EQ(st.st_mtim.tv_nsec, 123456789);
  const std::string preimage =
      absl::StrCat("memd-safetensors-v1\n", st.st_dev, ":", st.st_ino, ":", st.st_size, ":",
                   "1700000000123456789", ":",
                   static_cast<long long>(st.st_ctim.tv_sec) * 1000000000LL +
                       st.st_ctim.tv_nsec,
                   "\n", kHeader);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(preimage.data()), preimage.size(), digest);
  const std::string expected =
      absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(digest), sizeof(digest)));

  absl::StatusOr<File> file = ReadFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->fingerprint, expected);
  EXPECT_EQ(file->identity.size, static_cast<std::uint64_t>(st.st_size));
  EXPECT_EQ(file->identity.MtimeNs(), "1700000000123456789");
  EXPECT_EQ(file->header.header_bytes, sizeof(kHeader) - 1);
  ASSERT_EQ(file->header.tensors.size(), 2u);
}

TEST_F(SafetensorsFileTest, FingerprintIsStableUntilTheFileIsTouched) {
  const std::string path = WriteModel();
  SetTimes(path, 1700000000, 0);
  absl::StatusOr<File> first = ReadFile(path);
  absl::StatusOr<File> again = ReadFile(path);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first->fingerprint, again->fingerprint);
  EXPECT_EQ(first->fingerprint.size(), 64u);
  EXPECT_EQ(first->fingerprint.find_first_not_of("0123456789abcdef"), std::string::npos);

  SetTimes(path, 1700000000, 1);  // One nanosecond later.
  absl::StatusOr<File> touched = ReadFile(path);
  ASSERT_TRUE(touched.ok());
  EXPECT_NE(touched->fingerprint, first->fingerprint);
  // The same bytes and times elsewhere: another inode, another fingerprint.
  const std::string copy = WriteModel("copy.safetensors");
  SetTimes(copy, 1700000000, 1);
  absl::StatusOr<File> other = ReadFile(copy);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->fingerprint, touched->fingerprint);
}

TEST_F(SafetensorsFileTest, ReadFileRefusesShortFilesAndHeaderLengthsItCannotHold) {
  auto refused = [&](const std::string& name, const std::string& bytes,
                     const std::string& part) {
    absl::StatusOr<File> file = ReadFile(Write(name, bytes));
    ASSERT_FALSE(file.ok()) << name;
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
    EXPECT_THAT(std::string(file.status().message()), HasSubstr(part)) << name;
  };
  refused("empty", "", "0 bytes, fewer than the 8");
  refused("short", "abc", "3 bytes");
  refused("zero", FileBytes("", "data"), "header length is 0");
  refused("past", LengthBytes(100) + "{}", "runs past its end");
  refused("limit", LengthBytes(kMaxHeaderBytes + 1) + "{}", "over the limit");
  refused("huge", LengthBytes(~std::uint64_t{0}) + "{}", "over the limit");
  refused("bad", FileBytes(R"({"w":1})", ""), "tensor \"w\" is the number 1");
}

// A header length the limit allows but the file does not hold is refused
// before memctl allocates it; one beyond the limit too, even when the
// (sparse) file is that large.
TEST_F(SafetensorsFileTest, ReadFileChecksTheLengthBeforeAllocatingIt) {
  const std::string path = Write("sparse", LengthBytes(kMaxHeaderBytes + 7));
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(kMaxHeaderBytes) * 2), 0);
  absl::StatusOr<File> file = ReadFile(path);
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(std::string(file.status().message()), HasSubstr("over the limit"));
}

TEST_F(SafetensorsFileTest, ReadFileRefusesDirectoriesAndFifosWithoutBlocking) {
  absl::StatusOr<File> directory = ReadFile(dir_.path());
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(directory.status().message()), HasSubstr("not a regular file"));
  const std::string fifo = dir_.Join("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<File> from_fifo = ReadFile(fifo);  // Nobody writes: must not block.
  EXPECT_EQ(from_fifo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadFile(dir_.Join("missing")).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SafetensorsFileTest, CheckUnchangedNoticesTouchesRewritesAndReplacement) {
  const std::string path = WriteModel();
  SetTimes(path, 1700000000, 0);
  absl::StatusOr<File> loaded = ReadFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(CheckUnchanged(*loaded, fd).ok());
  EXPECT_TRUE(CheckUnchanged(*loaded, -1).ok());

  // Replaced by rename: the open file is as it was, the name is another's.
  const std::string replacement = WriteModel("next.safetensors");
  SetTimes(replacement, 1700000000, 0);
  ASSERT_EQ(::rename(replacement.c_str(), path.c_str()), 0);
  absl::Status replaced = CheckUnchanged(*loaded, -1);
  EXPECT_EQ(replaced.code(), absl::StatusCode::kAborted) << replaced;
  EXPECT_THAT(std::string(replaced.message()),
              AllOf(HasSubstr(path + " changed while loading"),
                    HasSubstr("its fingerprint is now")));
  // (The file read lost its name, which changed its ctime too.)
  EXPECT_EQ(CheckUnchanged(*loaded, fd).code(), absl::StatusCode::kAborted);
  ::close(fd);

  // Touched: the file read is no longer what its header and stat said.
  absl::StatusOr<File> next = ReadFile(path);
  ASSERT_TRUE(next.ok());
  const int next_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  SetTimes(path, 1700000001, 0);
  absl::Status touched = CheckUnchanged(*next, next_fd);
  EXPECT_EQ(touched.code(), absl::StatusCode::kAborted) << touched;
  EXPECT_THAT(std::string(touched.message()), HasSubstr("changed while loading"));
  EXPECT_EQ(CheckUnchanged(*next, -1).code(), absl::StatusCode::kAborted);
  ::close(next_fd);

  // Gone.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  EXPECT_EQ(CheckUnchanged(*next, -1).code(), absl::StatusCode::kAborted);
}

TEST(SafetensorsNameTest, PlacesAndNamesFollowTheContract) {
  EXPECT_EQ(*Place("host"), "host");
  EXPECT_EQ(*Place("pinned"), "pinned");
  EXPECT_EQ(*Place("device:0"), "device-0");
  EXPECT_EQ(*Place("device:12"), "device-12");
  EXPECT_EQ(*Place("device:01"), "device-1");
  EXPECT_EQ(Place("device:x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Place("gpu").status().code(), absl::StatusCode::kInvalidArgument);
  const std::string fingerprint =
      "f4cb6f4407948fbc177b84e396800776b5ee91e2f9dd97c5d6f08865bc19a7c9";
  EXPECT_EQ(BufferName(fingerprint, "device-0"),
            "safetensors/f4cb6f4407948fbc177b84e396800776/device-0");
}

TEST(SafetensorsNameTest, FileAttributeIsThePrintableBaseNameCutTo128Bytes) {
  EXPECT_EQ(FileAttribute("/models/llama/model.safetensors"), "model.safetensors");
  EXPECT_EQ(FileAttribute("model.safetensors"), "model.safetensors");
  // Each byte outside 0x20-0x7e is one '?': a two-byte UTF-8 é is two.
  EXPECT_EQ(FileAttribute("dir/caf\xc3\xa9\tx\x7f.st"), "caf???x?.st");
  EXPECT_EQ(FileAttribute(std::string(300, 'a')), std::string(128, 'a'));
  EXPECT_EQ(FileAttribute("d/" + std::string(127, 'a') + "\xc3\xa9"),
            std::string(127, 'a') + "?");
}

TEST_F(SafetensorsFileTest, AttributesAreExactlyTheSixOfTheContract) {
  const std::string path = WriteModel("w\xc3\xa9.safetensors");
  SetTimes(path, 1700000000, 42);
  absl::StatusOr<File> file = ReadFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(Attributes(*file),
              ElementsAre(Pair("format", "safetensors"),
                          Pair("safetensors.file", "w??.safetensors"),
                          Pair("safetensors.file_size",
                               absl::StrCat(8 + sizeof(kHeader) - 1 + 24)),
                          Pair("safetensors.fingerprint", file->fingerprint),
                          Pair("safetensors.header_bytes", absl::StrCat(sizeof(kHeader) - 1)),
                          Pair("safetensors.mtime_ns", "1700000000000000042")));
}

}  // namespace
}  // namespace memd::memctl::safetensors
