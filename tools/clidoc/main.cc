// memd-clidoc OUTPUT_DIR: writes the manual pages and shell completions of
// memd, memctl, memd-replay and memd-tracegen, from the command lines the
// programs parse (pages.h), into OUTPUT_DIR: man/memd.8, man/<tool>.1,
// bash/<program>, zsh/_<program>. Run by the build (tools/clidoc/CMakeLists.txt); not
// installed.

#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "tools/clidoc/clidoc.h"
#include "tools/clidoc/pages.h"

namespace {

bool Write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "memd-clidoc: cannot write " << path << "\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: memd-clidoc OUTPUT_DIR\n";
    return 2;
  }
  const std::filesystem::path out = argv[1];
  bool ok = true;
  std::vector<memd::clidoc::Program> programs;
  programs.push_back(memd::clidoc::Memd());
  programs.push_back(memd::clidoc::Memctl());
  programs.push_back(memd::clidoc::MemdReplay());
  programs.push_back(memd::clidoc::MemdTracegen());
  for (const memd::clidoc::Program& program : programs) {
    const CLI::App& app = *program.app;
    const std::string name = app.get_name();
    ok = Write(out / "man" / (name + "." + program.page.section),
               memd::clidoc::ManPage(app, program.page)) &&
         ok;
    ok = Write(out / "bash" / name, memd::clidoc::BashCompletion(app)) && ok;
    ok = Write(out / "zsh" / ("_" + name), memd::clidoc::ZshCompletion(app)) && ok;
  }
  return ok ? 0 : 1;
}
