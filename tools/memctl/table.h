#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace memd::memctl {

/// A plain-text table for humans: a header row, columns padded to their
/// widest cell, two spaces apart. Numeric columns align right. Control
/// characters in cells (a process name can hold anything) print as '?', so a
/// cell cannot break the layout or the terminal. Not thread-safe.
class Table {
 public:
  struct Column {
    std::string title;
    bool right_aligned = false;
  };

  explicit Table(std::vector<Column> columns);

  // Cells beyond the column count are dropped; missing ones are empty.
  void AddRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }

  void Print(std::ostream& out) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// `text` with control characters replaced by '?'.
std::string Printable(std::string text);

}  // namespace memd::memctl
