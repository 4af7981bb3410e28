#include "tools/memctl/format.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/bytes.h"
#include "tools/memctl/progress.h"
#include "tools/memctl/table.h"

namespace memd::memctl {
namespace {

// Buffer size for getpwuid_r/getgrgid_r when sysconf has no opinion.
constexpr long kDefaultNameBuffer = 16384;

long NameBufferSize(int name) {
  long size = ::sysconf(name);
  return size > 0 ? size : kDefaultNameBuffer;
}

}  // namespace

std::string FormatLocalTime(absl::Time time) {
  if (time == absl::UnixEpoch()) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S %Z", time, absl::LocalTimeZone());
}

std::string FormatAge(absl::Duration age) {
  if (age < absl::ZeroDuration()) age = absl::ZeroDuration();
  return absl::FormatDuration(absl::Trunc(age, absl::Seconds(1)));
}

void PrintLeaks(std::ostream& out, const LeakReport& report, const LeaksOptions& options) {
  if (report.leaks.empty() && report.omitted == 0) {
    out << "no leaks: nothing older than " << FormatAge(options.older_than)
        << ", no session holding " << options.many_leases << " leases or more\n";
    return;
  }
  Table table({{"UID", true}, {"KIND"}, {"SUBJECT"}, {"BYTES", true}, {"AGE", true},
               {"PID", true}, {"EVIDENCE"}});
  for (const Leak& leak : report.leaks) {
    const bool counted = leak.kind != "many_leases";
    table.AddRow({absl::StrCat(leak.uid), leak.kind, leak.subject,
                  counted ? FormatBytes(leak.bytes) : "-", counted ? FormatAge(leak.age) : "-",
                  leak.pid == 0 ? "-" : absl::StrCat(leak.pid), leak.evidence});
  }
  table.Print(out);
  if (report.omitted > 0) out << report.omitted << " more not shown\n";
}

std::string FormatRecommendation(const Recommendation& recommendation) {
  const bool copies = recommendation.action == "prefetch" || recommendation.action == "move";
  std::string line = absl::StrCat(recommendation.subject, ": ", recommendation.evidence, " -> ",
                                  recommendation.action);
  if (!recommendation.locations.empty()) {
    absl::StrAppend(&line, copies ? " to " : " on ",
                    absl::StrJoin(recommendation.locations, ","));
  }
  absl::StrAppend(&line, " (", FormatBytes(recommendation.bytes),
                  copies ? " to copy)" : " to free)");
  return line;
}

std::vector<std::pair<std::string, std::string>> UsageRows(const BufferUsage& usage) {
  // "host 3, device:0 412"; "-" when empty.
  auto counts = [](const auto& by, auto name) {
    std::vector<std::string> parts;
    for (const auto& [key, n] : by) parts.push_back(absl::StrCat(name(key), " ", n));
    return parts.empty() ? std::string("-") : absl::StrJoin(parts, ", ");
  };
  auto same = [](const std::string& key) { return key; };
  auto user = [](uid_t uid) {
    // The daemon's key for every uid past its per-buffer cap.
    return uid == static_cast<uid_t>(-1) ? std::string("other users") : UserName(uid);
  };
  std::vector<std::string> moved;
  for (const auto& [direction, bytes] : usage.bytes_copied) {
    moved.push_back(absl::StrCat(FormatBytes(bytes), " ", direction));
  }
  return {
      {"opens", counts(usage.opens_by_location, same)},
      {"opens by user", counts(usage.opens_by_uid, user)},
      {"copies", absl::StrCat(usage.lazy_copies, moved.empty() ? "" : " (",
                              absl::StrJoin(moved, ", "), moved.empty() ? "" : ")")},
      {"copies avoided", absl::StrCat(usage.copies_avoided)},
      {"last used", usage.last_used.has_value() ? FormatLocalTime(*usage.last_used)
                                                : "never since memd started"},
  };
}

std::string UserName(uid_t uid) {
  std::vector<char> buffer(static_cast<std::size_t>(NameBufferSize(_SC_GETPW_R_SIZE_MAX)));
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr) {
    return found->pw_name;
  }
  return absl::StrCat(uid);
}

std::optional<uid_t> ParseUser(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::uint32_t number = 0;
  if (text.find_first_not_of("0123456789") == std::string::npos) {
    if (!absl::SimpleAtoi(text, &number)) return std::nullopt;
    return static_cast<uid_t>(number);
  }
  std::vector<char> buffer(static_cast<std::size_t>(NameBufferSize(_SC_GETPW_R_SIZE_MAX)));
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwnam_r(text.c_str(), &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr) {
    return found->pw_uid;
  }
  return std::nullopt;
}

std::string GroupName(gid_t gid) {
  std::vector<char> buffer(static_cast<std::size_t>(NameBufferSize(_SC_GETGR_R_SIZE_MAX)));
  group entry{};
  group* found = nullptr;
  if (::getgrgid_r(gid, &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr) {
    return found->gr_name;
  }
  return absl::StrCat(gid);
}

std::string FormatDurability(const DurabilityStats& durability) {
  if (durability.generation == 0) return "";
  std::string text =
      durability.recording
          ? "durability recording\n"
          : absl::StrCat("durability OFF (",
                         durability.not_recording.empty() ? "the daemon does not say why"
                                                          : durability.not_recording,
                         "): buffers will not outlive this memd\n");
  absl::StrAppend(&text, "generation ", durability.generation);
  if (!durability.recovered && durability.lost_segments > 0) {
    return absl::StrCat(text, ", started EMPTY: the previous state could not be read; ",
                        durability.lost_segments,
                        durability.lost_segments == 1 ? " segment" : " segments",
                        " and their buffers lost (the daemon's log says why)\n");
  }
  if (!durability.recovered) return absl::StrCat(text, ", started from nothing\n");
  // Microseconds: a recovery takes milliseconds, and nanoseconds are noise.
  absl::StrAppend(&text, ", recovered ", FormatLocalTime(durability.recovered_at), " in ",
                  absl::FormatDuration(absl::Trunc(durability.recovery, absl::Microseconds(1))),
                  ": ", durability.adopted_buffers,
                  durability.adopted_buffers == 1 ? " buffer (" : " buffers (",
                  FormatBytes(durability.adopted_bytes), ") in ", durability.adopted_segments,
                  durability.adopted_segments == 1 ? " segment" : " segments", " adopted, ",
                  durability.lost_buffers, " lost\n");
  if (durability.in_grace) {
    absl::StrAppend(&text, "grace period on: ", durability.awaiting_holders,
                    durability.awaiting_holders == 1 ? " buffer waits for its holders"
                                                     : " buffers wait for their holders",
                    " (kept until it ends, even if unlinked), ",
                    durability.reclaimable_leases,
                    durability.reclaimable_leases == 1 ? " lease" : " leases",
                    " may be re-claimed\n");
  }
  return text;
}

Json TransferReportJson(const TransferReport& report) {
  Json json;
  json["bytes"] = report.bytes;
  json["seconds"] = absl::ToDoubleSeconds(report.elapsed);
  json["gb_per_s"] = GigabytesPerSecond(report.bytes, report.elapsed);
  json["path"] = report.path;
  json["retries"] = report.retries;
  json["source"] = report.source;
  json["destination"] = report.destination;
  json["file_io"] = report.file_io;
  return json;
}

std::string FormatTransferReport(const TransferReport& report) {
  std::string how = report.path.empty() ? std::string() : report.path;
  if (report.retries > 0) {
    absl::StrAppend(&how, how.empty() ? "" : ", ", report.retries,
                    report.retries == 1 ? " retry" : " retries");
  }
  return absl::StrCat(FormatBytes(report.bytes), " in ",
                      absl::StrFormat("%.2f", absl::ToDoubleSeconds(report.elapsed)), " s, ",
                      FormatRate(GigabytesPerSecond(report.bytes, report.elapsed) * 1e9),
                      how.empty() ? "" : absl::StrCat(" (", how, ")"));
}

Json WithTransferReport(Json json, const TransferReport& report) {
  const Json fields = TransferReportJson(report);  // items() does not own it.
  for (const auto& [key, value] : fields.items()) json[key] = value;
  return json;
}

void PrintJson(std::ostream& out, const Json& json) {
  out << json.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';
}

}  // namespace memd::memctl
