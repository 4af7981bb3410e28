#include "tools/memctl/table.h"

#include <algorithm>

namespace memd::memctl {

std::string Printable(std::string text) {
  for (char& c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) c = '?';
  }
  return text;
}

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  for (std::string& cell : cells) cell = Printable(std::move(cell));
  rows_.push_back(std::move(cells));
}

void Table::Print(std::ostream& out) const {
  std::vector<std::size_t> widths(columns_.size());
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    widths[i] = columns_[i].title.size();
    for (const auto& row : rows_) widths[i] = std::max(widths[i], row[i].size());
  }
  auto print_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const bool last = i + 1 == cells.size();
      std::string pad(widths[i] - cells[i].size(), ' ');
      if (columns_[i].right_aligned) {
        line += pad + cells[i];
      } else {
        line += cells[i];
        // No trailing blanks: they only get in the way of grep and diff.
        if (!last) line += pad;
      }
      if (!last) line += "  ";
    }
    out << line << '\n';
  };
  std::vector<std::string> titles;
  for (const Column& column : columns_) titles.push_back(column.title);
  print_row(titles);
  for (const auto& row : rows_) print_row(row);
}

}  // namespace memd::memctl
