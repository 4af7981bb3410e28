#pragma once

// memctl's subcommands as CLI11 declares them: each one's options, help
// and examples, and the option texts the parse fills for cli.cc to check
// and convert.

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "tools/memctl/cli.h"

namespace memd::memctl {

// Options whose text is checked by a validator during the parse and
// converted after it.
struct OptionTexts {
  std::string watch;
  std::string mode = "0600";
  std::string size;
  std::string max_stream = "1GiB";
  std::string wait = "0";
  // prefetch's own: its copy is a transfer of memctl's session, which ends
  // with memctl, so by default it waits for the copy (10 minutes at most).
  std::string prefetch_wait = "600";
  std::string owner;
  std::string priority = "normal";
  std::string chunk_size;
  std::string timeout;
  bool direct_io = false;
  bool no_direct_io = false;
  std::string read_threads;
  std::string cache = "keep";
  bool no_seal = false;
  std::vector<std::string> attrs;
  std::string fifo_timeout = absl::StrCat(absl::ToInt64Seconds(kDefaultFifoTimeout));
  bool follow_symlinks = false;
  std::string older_than = "1h";
  std::string wait_for_memory = "0";
};

// One subcommand: how to declare it, and what it runs.
struct Subcommand {
  CLI::App* (*declare)(CLI::App&, Invocation&, OptionTexts&);
  Command command;
};

// Every subcommand, in the order the main help lists them.
std::span<const Subcommand> Subcommands();

// Declares memctl's whole command line on `app` (main options, then every
// subcommand), bound to `invocation` and `texts`. Returns each
// subcommand's App with the command it runs.
std::vector<std::pair<CLI::App*, Command>> DeclareCommandLine(CLI::App& app,
                                                             Invocation& invocation,
                                                             OptionTexts& texts);

}  // namespace memd::memctl
