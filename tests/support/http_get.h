#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace memd::test {

struct HttpResponse {
  int status = 0;     // 200, 404...
  std::string body;
};

// GET http://HOST:PORT/path over plain TCP (HTTP/1.0, loopback test servers
// only). Errors: UNAVAILABLE (cannot connect), DATA_LOSS (not HTTP).
absl::StatusOr<HttpResponse> HttpGet(const std::string& host_port,
                                     const std::string& path);

// A free TCP port on 127.0.0.1 right now, for servers that cannot report
// the port they bound (it could be taken again before they bind it; tests
// accept that small race).
int FreeLoopbackPort();

// Percent-encodes a query-string value.
std::string UrlEncode(const std::string& text);

}  // namespace memd::test
