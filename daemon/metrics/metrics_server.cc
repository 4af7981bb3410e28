#include "daemon/metrics/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"

namespace memd::metrics {
namespace {

// Why `address` (IPv4 HOST:PORT) cannot be bound, found by binding it
// ourselves: civetweb says only "null context when constructing
// CivetServer". Empty when the address is of another form or binds.
std::string WhyNotBound(const std::string& address) {
  const std::size_t colon = address.rfind(':');
  sockaddr_in in{};
  in.sin_family = AF_INET;
  std::uint32_t port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port > 65535 ||
      ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &in.sin_addr) != 1) {
    return "";
  }
  in.sin_port = htons(static_cast<std::uint16_t>(port));
  UniqueFd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe) return "";
  const int one = 1;
  // As civetweb binds: a port in TIME_WAIT is free.
  ::setsockopt(probe.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(probe.get(), reinterpret_cast<const sockaddr*>(&in), sizeof(in)) == 0) return "";
  const int error = errno;
  if (error == EADDRINUSE) {
    return absl::StrCat("port ", port, " is in use (another memd, or another program, "
                        "listens there)");
  }
  return absl::StrCat("bind: ", std::strerror(error));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& address,
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // One serving thread is plenty for a scrape every few seconds.
    exposer = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& error) {
    std::string why = WhyNotBound(address);
    if (why.empty()) why = error.what();
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", address, ": ", why,
        ". Set metrics_address (--metrics-address) to a free HOST:PORT, to HOST:0 "
        "for any free port (memctl stats shows which), or to \"\" to serve no metrics"));
  }
  for (const auto& collectable : collectables) exposer->RegisterCollectable(collectable);
  std::vector<int> ports = exposer->GetListeningPorts();
  std::string host = address.substr(0, address.rfind(':'));
  std::string bound =
      ports.empty() ? address : absl::StrCat(host, ":", ports.front());
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(exposer), std::move(collectables), bound));
}

}  // namespace memd::metrics
