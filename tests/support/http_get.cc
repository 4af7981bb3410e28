#include "tests/support/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/unique_fd.h"

namespace memd::test {

absl::StatusOr<HttpResponse> HttpGet(const std::string& host_port,
                                     const std::string& path) {
  const std::size_t colon = host_port.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(host_port.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("not HOST:PORT: ", host_port));
  }
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &target.sin_addr);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect ", host_port, ": ", std::strerror(errno)));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host_port, "\r\n\r\n");
  if (::write(fd.get(), request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError("short write");
  }
  std::string response;
  char chunk[65536];
  for (ssize_t got; (got = ::read(fd.get(), chunk, sizeof(chunk))) > 0;) {
    response.append(chunk, static_cast<std::size_t>(got));
  }
  HttpResponse parsed;
  const std::size_t space = response.find(' ');
  const std::size_t body = response.find("\r\n\r\n");
  if (space == std::string::npos || body == std::string::npos ||
      !absl::SimpleAtoi(response.substr(space + 1, 3), &parsed.status)) {
    return absl::DataLossError(absl::StrCat("not an HTTP response from ", host_port));
  }
  parsed.body = response.substr(body + 4);
  return parsed;
}

int FreeLoopbackPort() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return -1;
  }
  return ntohs(address.sin_port);
}

std::string UrlEncode(const std::string& text) {
  std::string encoded;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      encoded.push_back(static_cast<char>(c));
    } else {
      encoded += absl::StrFormat("%%%02X", c);
    }
  }
  return encoded;
}

}  // namespace memd::test
